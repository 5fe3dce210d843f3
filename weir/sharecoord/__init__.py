"""Share groups (KIP-932): the pure cores of Weir's queues.

The share-group coordinator (membership, epochs, the broker's assignment) and the
share partition (records acquired under a lock, acknowledged one by one, redelivered,
archived), with the records of their durable state. Like `weir.groupcoord`: no
sockets, no disk, no clock (time is an argument); the broker drives them.
"""
