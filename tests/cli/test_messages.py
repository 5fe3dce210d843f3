from weir.cli.errors import describe_kafka_error, error_name
from weir.cli.produce_command import PartitionChooser
from weir.format.errors import ErrorCode
from weir.format.partitioner import partition_for_key


def test_unknown_topic_message() -> None:
    assert (
        describe_kafka_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic="x")
        == "topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"
    )


def test_existing_topic_message() -> None:
    assert (
        describe_kafka_error(ErrorCode.TOPIC_ALREADY_EXISTS, topic="x", action="create")
        == "topic 'x' already exists (TOPIC_ALREADY_EXISTS)"
    )


def test_broker_message_is_kept_with_the_code_name() -> None:
    assert describe_kafka_error(
        ErrorCode.INVALID_CONFIG, topic="x", action="create", message="retention.ms: not a number"
    ) == ("cannot create topic 'x': retention.ms: not a number (INVALID_CONFIG)")


def test_partition_errors_name_the_partition() -> None:
    assert describe_kafka_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, topic="x", partition=2) == (
        "topic 'x' partition 2: not leader or follower (NOT_LEADER_OR_FOLLOWER)"
    )


def test_unknown_error_codes_still_have_a_name() -> None:
    assert error_name(9999) == "ERROR_9999"


def test_partition_choice_follows_kafka_default_partitioner() -> None:
    chooser = PartitionChooser(5, fixed=None)
    assert chooser.choose(b"21") == partition_for_key(b"21", 5)
    sticky = chooser.choose(None)
    assert chooser.choose(None) == sticky
    chooser.next_request()
    assert chooser.choose(None) == (sticky + 1) % 5
    assert PartitionChooser(5, fixed=3).choose(b"21") == 3
