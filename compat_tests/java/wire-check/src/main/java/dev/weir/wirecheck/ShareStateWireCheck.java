package dev.weir.wirecheck;

import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.DeleteShareGroupStateRequestData;
import org.apache.kafka.common.message.DeleteShareGroupStateResponseData;
import org.apache.kafka.common.message.InitializeShareGroupStateRequestData;
import org.apache.kafka.common.message.InitializeShareGroupStateResponseData;
import org.apache.kafka.common.message.ReadShareGroupStateRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateResponseData;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryRequestData;
import org.apache.kafka.common.message.ReadShareGroupStateSummaryResponseData;
import org.apache.kafka.common.message.WriteShareGroupStateRequestData;
import org.apache.kafka.common.message.WriteShareGroupStateResponseData;

/**
 * Prints kafka-clients' serialization of sample messages of the internal share-state
 * APIs (83-87), one line per case and version, as ShareWireCheck does;
 * tests/wire/test_share_state_wire.py builds the same values with Weir's declarations.
 * Run by regenerate.sh.
 */
public final class ShareStateWireCheck {
    static final Uuid TOPIC_A = ShareWireCheck.TOPIC_A;
    static final Uuid TOPIC_B = ShareWireCheck.TOPIC_B;
    static final short FENCED_LEADER_EPOCH = 74;
    static final short FENCED_STATE_EPOCH = 124;
    static final short NOT_COORDINATOR = 16;

    private ShareStateWireCheck() {}

    public static void main(String[] args) throws Exception {
        ShareWireCheck.emit("initialize-request", v -> new InitializeShareGroupStateRequestData()
            .setGroupId("queue-g")
            .setTopics(List.of(new InitializeShareGroupStateRequestData.InitializeStateData()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(new InitializeShareGroupStateRequestData.PartitionData()
                    .setPartition(3).setStateEpoch(2).setStartOffset(-1L))))), 0, 0);
        ShareWireCheck.emit("initialize-response", v -> new InitializeShareGroupStateResponseData()
            .setResults(List.of(new InitializeShareGroupStateResponseData.InitializeStateResult()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(new InitializeShareGroupStateResponseData.PartitionResult()
                    .setPartition(3))))), 0, 0);
        ShareWireCheck.emit("read-request", v -> new ReadShareGroupStateRequestData()
            .setGroupId("queue-g")
            .setTopics(List.of(new ReadShareGroupStateRequestData.ReadStateData()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(
                    new ReadShareGroupStateRequestData.PartitionData().setPartition(0).setLeaderEpoch(5),
                    new ReadShareGroupStateRequestData.PartitionData().setPartition(1).setLeaderEpoch(-1))))),
            0, 0);
        ShareWireCheck.emit("read-response", v -> readResponse(), 0, 0);
        ShareWireCheck.emit("write-request", ShareStateWireCheck::writeRequest, 0, 1);
        ShareWireCheck.emit("write-response", v -> new WriteShareGroupStateResponseData()
            .setResults(List.of(new WriteShareGroupStateResponseData.WriteStateResult()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(
                    new WriteShareGroupStateResponseData.PartitionResult().setPartition(0),
                    new WriteShareGroupStateResponseData.PartitionResult().setPartition(1)
                        .setErrorCode(FENCED_STATE_EPOCH).setErrorMessage("stale state epoch"))))),
            0, 1);
        ShareWireCheck.emit("delete-request", v -> new DeleteShareGroupStateRequestData()
            .setGroupId("queue-g")
            .setTopics(List.of(new DeleteShareGroupStateRequestData.DeleteStateData()
                .setTopicId(TOPIC_B)
                .setPartitions(List.of(
                    new DeleteShareGroupStateRequestData.PartitionData().setPartition(2))))), 0, 0);
        ShareWireCheck.emit("delete-response", v -> new DeleteShareGroupStateResponseData()
            .setResults(List.of(new DeleteShareGroupStateResponseData.DeleteStateResult()
                .setTopicId(TOPIC_B)
                .setPartitions(List.of(new DeleteShareGroupStateResponseData.PartitionResult()
                    .setPartition(2).setErrorCode(NOT_COORDINATOR).setErrorMessage("moved"))))), 0, 0);
        ShareWireCheck.emit("summary-request", v -> new ReadShareGroupStateSummaryRequestData()
            .setGroupId("queue-g")
            .setTopics(List.of(new ReadShareGroupStateSummaryRequestData.ReadStateSummaryData()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(new ReadShareGroupStateSummaryRequestData.PartitionData()
                    .setPartition(0).setLeaderEpoch(-1))))), 0, 1);
        ShareWireCheck.emit("summary-response", v -> new ReadShareGroupStateSummaryResponseData()
            .setResults(List.of(new ReadShareGroupStateSummaryResponseData.ReadStateSummaryResult()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(new ReadShareGroupStateSummaryResponseData.PartitionResult()
                    .setPartition(0).setStateEpoch(1).setLeaderEpoch(4).setStartOffset(120L)
                    .setDeliveryCompleteCount(v >= 1 ? 7 : -1))))), 0, 1);
    }

    static ReadShareGroupStateResponseData readResponse() {
        return new ReadShareGroupStateResponseData()
            .setResults(List.of(new ReadShareGroupStateResponseData.ReadStateResult()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(
                    new ReadShareGroupStateResponseData.PartitionResult()
                        .setPartition(0).setStateEpoch(1).setStartOffset(100L)
                        .setStateBatches(List.of(
                            new ReadShareGroupStateResponseData.StateBatch()
                                .setFirstOffset(100L).setLastOffset(104L)
                                .setDeliveryState((byte) 2).setDeliveryCount((short) 1),
                            new ReadShareGroupStateResponseData.StateBatch()
                                .setFirstOffset(105L).setLastOffset(105L)
                                .setDeliveryState((byte) 0).setDeliveryCount((short) 3))),
                    new ReadShareGroupStateResponseData.PartitionResult()
                        .setPartition(1).setStartOffset(-1L),
                    new ReadShareGroupStateResponseData.PartitionResult()
                        .setPartition(2).setErrorCode(FENCED_LEADER_EPOCH)
                        .setErrorMessage("The leader epoch in the request is older than the epoch on the broker.")))));
    }

    static WriteShareGroupStateRequestData writeRequest(int version) {
        return new WriteShareGroupStateRequestData()
            .setGroupId("queue-g")
            .setTopics(List.of(new WriteShareGroupStateRequestData.WriteStateData()
                .setTopicId(TOPIC_A)
                .setPartitions(List.of(new WriteShareGroupStateRequestData.PartitionData()
                    .setPartition(0).setStateEpoch(1).setLeaderEpoch(5).setStartOffset(100L)
                    .setDeliveryCompleteCount(version >= 1 ? 5 : -1)
                    .setStateBatches(List.of(
                        new WriteShareGroupStateRequestData.StateBatch()
                            .setFirstOffset(100L).setLastOffset(104L)
                            .setDeliveryState((byte) 2).setDeliveryCount((short) 1),
                        new WriteShareGroupStateRequestData.StateBatch()
                            .setFirstOffset(107L).setLastOffset(109L)
                            .setDeliveryState((byte) 4).setDeliveryCount((short) 5)))))));
    }
}
