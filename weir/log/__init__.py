"""Partition logs on disk: segments, indexes, leader epochs, recovery, retention, fsync."""

from weir.log.config import TOPIC_CONFIGS, ConfigDef, InvalidConfig, LogConfig
from weir.log.errors import LogClosed, LogError, LogTruncated, OffsetOutOfRange
from weir.log.flusher import GroupFlusher
from weir.log.manager import LogManager
from weir.log.partition import PartitionLog
from weir.log.partition_append import AppendResult
from weir.log.partition_read import ReadResult

__all__ = [
    "TOPIC_CONFIGS",
    "AppendResult",
    "ConfigDef",
    "GroupFlusher",
    "InvalidConfig",
    "LogClosed",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogTruncated",
    "OffsetOutOfRange",
    "PartitionLog",
    "ReadResult",
]
