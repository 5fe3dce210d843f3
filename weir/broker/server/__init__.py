"""The Kafka listener: accepting connections, framing requests, pipelining them per
connection within the broker's budgets (in-flight bytes, file descriptors), and
dispatching each frame to its handler. It knows the handlers only through the
registry `weir.broker.handlers.apis`; nothing below imports it."""
