"""The services that drive the pure coordinators of `weir.groupcoord` (and, next,
transactions and share groups): they store the coordinators' records in their
internal topic, load them back when this broker leads its partitions, run their
timers, and say when they cannot serve (`InternalStateOwner`). Handlers call them;
they never see a request frame."""
