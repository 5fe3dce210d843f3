package dev.weir.wirecheck;

import java.lang.reflect.Constructor;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.function.IntFunction;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.message.AlterShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.AlterShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.DeleteShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.DeleteShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.DescribeGroupsRequestData;
import org.apache.kafka.common.message.DescribeGroupsResponseData;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsRequestData;
import org.apache.kafka.common.message.DescribeShareGroupOffsetsResponseData;
import org.apache.kafka.common.message.ListGroupsRequestData;
import org.apache.kafka.common.message.ListGroupsResponseData;
import org.apache.kafka.common.message.ShareAcknowledgeRequestData;
import org.apache.kafka.common.message.ShareAcknowledgeResponseData;
import org.apache.kafka.common.message.ShareFetchRequestData;
import org.apache.kafka.common.message.ShareFetchResponseData;
import org.apache.kafka.common.message.ShareGroupDescribeRequestData;
import org.apache.kafka.common.message.ShareGroupDescribeResponseData;
import org.apache.kafka.common.message.ShareGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ShareGroupHeartbeatResponseData;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.SimpleRecord;

/**
 * Prints kafka-clients' serialization of sample share-group messages (and ListGroups v5,
 * DescribeGroups v5-6), one line per case and version:
 *
 * <pre>case-name MessageName version hex</pre>
 *
 * tests/wire/test_share_groups_wire.py builds the same values with Weir's declarations
 * and compares bytes; the samples here and there must stay in step. Each encoding is also
 * read back by Kafka's own parser, which must return an equal message. Run by
 * regenerate.sh.
 */
public final class ShareWireCheck {
    static final Uuid TOPIC_A = new Uuid(0x0011223344556677L, 0x8899aabbccddeeffL);
    static final Uuid TOPIC_B = new Uuid(0x0102030405060708L, 0x090a0b0c0d0e0f10L);
    static final short NOT_LEADER_OR_FOLLOWER = 6;
    static final short NOT_COORDINATOR = 16;
    static final short GROUP_ID_NOT_FOUND = 69;
    static final short INVALID_RECORD_STATE = 121;
    static final short SHARE_SESSION_NOT_FOUND = 122;
    static final short UNKNOWN_TOPIC_OR_PARTITION = 3;

    /** Two records at offsets 100-101, fixed timestamps: a deterministic batch. */
    static final MemoryRecords RECORDS = MemoryRecords.withRecords(
        100L,
        Compression.NONE,
        new SimpleRecord(1700000000000L, bytes("k1"), bytes("v1")),
        new SimpleRecord(1700000000001L, null, bytes("v2")));

    private ShareWireCheck() {}

    public static void main(String[] args) throws Exception {
        System.out.println("records-batch - - " + HexFormat.of().formatHex(bytesOf(RECORDS.buffer())));
        emit("heartbeat-join", v -> heartbeatJoin(), 1, 1);
        emit("heartbeat-steady", v -> new ShareGroupHeartbeatRequestData()
            .setGroupId("queue-g").setMemberId("m-1").setMemberEpoch(7), 1, 1);
        emit("heartbeat-response-assigned", v -> heartbeatAssigned(), 1, 1);
        emit("heartbeat-response-error", v -> new ShareGroupHeartbeatResponseData()
            .setErrorCode(NOT_COORDINATOR).setErrorMessage("not the coordinator"), 1, 1);
        emit("describe-request", v -> new ShareGroupDescribeRequestData()
            .setGroupIds(List.of("g1", "g2")).setIncludeAuthorizedOperations(true), 1, 1);
        emit("describe-response", v -> describeResponse(), 1, 1);
        emit("fetch-request-defaults", v -> new ShareFetchRequestData(), 1, 2);
        emit("fetch-request-open", ShareWireCheck::fetchOpen, 1, 2);
        emit("fetch-request-acks", ShareWireCheck::fetchAcks, 1, 2);
        emit("fetch-response-records", v -> fetchResponse(), 1, 2);
        emit("fetch-response-error", v -> new ShareFetchResponseData()
            .setErrorCode(SHARE_SESSION_NOT_FOUND).setErrorMessage("no share session"), 1, 2);
        emit("ack-request", ShareWireCheck::ackRequest, 1, 2);
        emit("ack-response", v -> ackResponse(), 1, 2);
        emit("describe-offsets-request", v -> describeOffsetsRequest(), 0, 1);
        emit("describe-offsets-response", v -> describeOffsetsResponse(), 0, 1);
        emit("alter-offsets-request", v -> alterOffsetsRequest(), 0, 0);
        emit("alter-offsets-response", v -> alterOffsetsResponse(), 0, 0);
        emit("delete-offsets-request", v -> new DeleteShareGroupOffsetsRequestData()
            .setGroupId("g1")
            .setTopics(List.of(
                new DeleteShareGroupOffsetsRequestData.DeleteShareGroupOffsetsRequestTopic()
                    .setTopicName("orders"),
                new DeleteShareGroupOffsetsRequestData.DeleteShareGroupOffsetsRequestTopic()
                    .setTopicName("gone"))), 0, 0);
        emit("delete-offsets-response", v -> deleteOffsetsResponse(), 0, 0);
        emit("list-groups-request", v -> new ListGroupsRequestData()
            .setStatesFilter(List.of("Stable", "Empty")).setTypesFilter(List.of("share")), 5, 5);
        emit("list-groups-response", v -> listGroupsResponse(), 5, 5);
        emit("describe-groups-request", v -> new DescribeGroupsRequestData()
            .setGroups(List.of("g1", "missing")).setIncludeAuthorizedOperations(true), 5, 6);
        emit("describe-groups-response", ShareWireCheck::describeGroupsResponse, 5, 6);
    }

    static ShareGroupHeartbeatRequestData heartbeatJoin() {
        return new ShareGroupHeartbeatRequestData()
            .setGroupId("queue-g")
            .setMemberId("m-1")
            .setMemberEpoch(0)
            .setRackId("rack-a")
            .setSubscribedTopicNames(List.of("orders", "payments"));
    }

    static ShareGroupHeartbeatResponseData heartbeatAssigned() {
        return new ShareGroupHeartbeatResponseData()
            .setMemberId("m-1")
            .setMemberEpoch(3)
            .setHeartbeatIntervalMs(5000)
            .setAssignment(new ShareGroupHeartbeatResponseData.Assignment().setTopicPartitions(List.of(
                new ShareGroupHeartbeatResponseData.TopicPartitions()
                    .setTopicId(TOPIC_A).setPartitions(List.of(0, 2)),
                new ShareGroupHeartbeatResponseData.TopicPartitions()
                    .setTopicId(TOPIC_B).setPartitions(List.of(1)))));
    }

    static ShareGroupDescribeResponseData describeResponse() {
        ShareGroupDescribeResponseData.Member member = new ShareGroupDescribeResponseData.Member()
            .setMemberId("m-1")
            .setMemberEpoch(4)
            .setClientId("c")
            .setClientHost("/127.0.0.1")
            .setSubscribedTopicNames(List.of("orders"))
            .setAssignment(new ShareGroupDescribeResponseData.Assignment().setTopicPartitions(List.of(
                new ShareGroupDescribeResponseData.TopicPartitions()
                    .setTopicId(TOPIC_A).setTopicName("orders").setPartitions(List.of(0, 1)))));
        return new ShareGroupDescribeResponseData().setGroups(List.of(
            new ShareGroupDescribeResponseData.DescribedGroup()
                .setGroupId("g1")
                .setGroupState("Stable")
                .setGroupEpoch(4)
                .setAssignmentEpoch(4)
                .setAssignorName("simple")
                .setMembers(List.of(member))
                .setAuthorizedOperations(0x0da8),
            new ShareGroupDescribeResponseData.DescribedGroup()
                .setErrorCode(GROUP_ID_NOT_FOUND)
                .setErrorMessage("Group g2 not found.")
                .setGroupId("g2")
                .setGroupState("Dead")));
    }

    static ShareFetchRequestData fetchOpen(int version) {
        ShareFetchRequestData.FetchPartitionCollection partitions =
            new ShareFetchRequestData.FetchPartitionCollection();
        partitions.add(new ShareFetchRequestData.FetchPartition().setPartitionIndex(0));
        partitions.add(new ShareFetchRequestData.FetchPartition().setPartitionIndex(3));
        ShareFetchRequestData.FetchTopicCollection topics = new ShareFetchRequestData.FetchTopicCollection();
        topics.add(new ShareFetchRequestData.FetchTopic().setTopicId(TOPIC_A).setPartitions(partitions));
        return new ShareFetchRequestData()
            .setGroupId("queue-g")
            .setMemberId("m-1")
            .setShareSessionEpoch(0)
            .setMaxWaitMs(500)
            .setMinBytes(1)
            .setMaxBytes(52428800)
            .setMaxRecords(500)
            .setBatchSize(500)
            // Ignorable: dropped at v1.
            .setShareAcquireMode((byte) 1)
            .setTopics(topics);
    }

    static ShareFetchRequestData fetchAcks(int version) {
        boolean renew = version >= 2;  // IsRenewAck is not ignorable: v1 cannot carry it
        ShareFetchRequestData.FetchPartitionCollection partitions =
            new ShareFetchRequestData.FetchPartitionCollection();
        partitions.add(new ShareFetchRequestData.FetchPartition().setPartitionIndex(0).setAcknowledgementBatches(List.of(
            new ShareFetchRequestData.AcknowledgementBatch()
                .setFirstOffset(10).setLastOffset(13).setAcknowledgeTypes(List.of((byte) 1, (byte) 2, (byte) 3, (byte) 0)),
            new ShareFetchRequestData.AcknowledgementBatch()
                .setFirstOffset(14).setLastOffset(20).setAcknowledgeTypes(List.of(renew ? (byte) 4 : (byte) 1)))));
        ShareFetchRequestData.FetchTopicCollection topics = new ShareFetchRequestData.FetchTopicCollection();
        topics.add(new ShareFetchRequestData.FetchTopic().setTopicId(TOPIC_A).setPartitions(partitions));
        return new ShareFetchRequestData()
            .setGroupId("queue-g")
            .setMemberId("m-1")
            .setShareSessionEpoch(2)
            .setMaxWaitMs(500)
            .setMinBytes(1)
            .setMaxBytes(1048576)
            .setMaxRecords(100)
            .setBatchSize(50)
            .setIsRenewAck(renew)
            .setTopics(topics)
            .setForgottenTopicsData(List.of(
                new ShareFetchRequestData.ForgottenTopic().setTopicId(TOPIC_B).setPartitions(List.of(1, 2))));
    }

    static ShareFetchResponseData fetchResponse() {
        ShareFetchResponseData.ShareFetchableTopicResponseCollection responses =
            new ShareFetchResponseData.ShareFetchableTopicResponseCollection();
        responses.add(new ShareFetchResponseData.ShareFetchableTopicResponse().setTopicId(TOPIC_A).setPartitions(List.of(
            new ShareFetchResponseData.PartitionData()
                .setPartitionIndex(0)
                .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(1).setLeaderEpoch(5))
                .setRecords(RECORDS)
                .setAcquiredRecords(List.of(
                    new ShareFetchResponseData.AcquiredRecords().setFirstOffset(100).setLastOffset(100).setDeliveryCount((short) 1),
                    new ShareFetchResponseData.AcquiredRecords().setFirstOffset(101).setLastOffset(101).setDeliveryCount((short) 3))),
            new ShareFetchResponseData.PartitionData()
                .setPartitionIndex(3)
                .setErrorCode(NOT_LEADER_OR_FOLLOWER)
                .setErrorMessage("not the leader")
                .setAcknowledgeErrorCode(INVALID_RECORD_STATE)
                .setAcknowledgeErrorMessage("offset 7 is not acquired")
                .setCurrentLeader(new ShareFetchResponseData.LeaderIdAndEpoch().setLeaderId(2).setLeaderEpoch(7))
                .setRecords(MemoryRecords.EMPTY))));
        ShareFetchResponseData.NodeEndpointCollection endpoints = new ShareFetchResponseData.NodeEndpointCollection();
        endpoints.add(new ShareFetchResponseData.NodeEndpoint().setNodeId(2).setHost("broker-2").setPort(9092).setRack("rack-b"));
        endpoints.add(new ShareFetchResponseData.NodeEndpoint().setNodeId(3).setHost("broker-3").setPort(9093));
        return new ShareFetchResponseData()
            .setThrottleTimeMs(10)
            .setAcquisitionLockTimeoutMs(30000)
            .setResponses(responses)
            .setNodeEndpoints(endpoints);
    }

    static ShareAcknowledgeRequestData ackRequest(int version) {
        boolean renew = version >= 2;
        ShareAcknowledgeRequestData.AcknowledgePartitionCollection partitionsA =
            new ShareAcknowledgeRequestData.AcknowledgePartitionCollection();
        partitionsA.add(new ShareAcknowledgeRequestData.AcknowledgePartition().setPartitionIndex(0).setAcknowledgementBatches(List.of(
            new ShareAcknowledgeRequestData.AcknowledgementBatch()
                .setFirstOffset(10).setLastOffset(10).setAcknowledgeTypes(List.of(renew ? (byte) 4 : (byte) 1)),
            new ShareAcknowledgeRequestData.AcknowledgementBatch()
                .setFirstOffset(11).setLastOffset(15)
                .setAcknowledgeTypes(List.of((byte) 2, (byte) 2, (byte) 3, (byte) 0, (byte) 1)))));
        ShareAcknowledgeRequestData.AcknowledgePartitionCollection partitionsB =
            new ShareAcknowledgeRequestData.AcknowledgePartitionCollection();
        partitionsB.add(new ShareAcknowledgeRequestData.AcknowledgePartition().setPartitionIndex(1).setAcknowledgementBatches(List.of(
            new ShareAcknowledgeRequestData.AcknowledgementBatch()
                .setFirstOffset(0).setLastOffset(99).setAcknowledgeTypes(List.of((byte) 3)))));
        ShareAcknowledgeRequestData.AcknowledgeTopicCollection topics =
            new ShareAcknowledgeRequestData.AcknowledgeTopicCollection();
        topics.add(new ShareAcknowledgeRequestData.AcknowledgeTopic().setTopicId(TOPIC_A).setPartitions(partitionsA));
        topics.add(new ShareAcknowledgeRequestData.AcknowledgeTopic().setTopicId(TOPIC_B).setPartitions(partitionsB));
        return new ShareAcknowledgeRequestData()
            .setGroupId("queue-g")
            .setMemberId("m-1")
            .setShareSessionEpoch(3)
            .setIsRenewAck(renew)
            .setTopics(topics);
    }

    static ShareAcknowledgeResponseData ackResponse() {
        ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponseCollection responses =
            new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponseCollection();
        responses.add(new ShareAcknowledgeResponseData.ShareAcknowledgeTopicResponse().setTopicId(TOPIC_A).setPartitions(List.of(
            new ShareAcknowledgeResponseData.PartitionData()
                .setPartitionIndex(0)
                .setCurrentLeader(new ShareAcknowledgeResponseData.LeaderIdAndEpoch().setLeaderId(1).setLeaderEpoch(5)),
            new ShareAcknowledgeResponseData.PartitionData()
                .setPartitionIndex(1)
                .setErrorCode(INVALID_RECORD_STATE)
                .setErrorMessage("bad state")
                .setCurrentLeader(new ShareAcknowledgeResponseData.LeaderIdAndEpoch().setLeaderId(-1).setLeaderEpoch(-1)))));
        ShareAcknowledgeResponseData.NodeEndpointCollection endpoints = new ShareAcknowledgeResponseData.NodeEndpointCollection();
        endpoints.add(new ShareAcknowledgeResponseData.NodeEndpoint().setNodeId(1).setHost("h").setPort(9092));
        return new ShareAcknowledgeResponseData()
            // Ignorable, v2+: dropped at v1.
            .setAcquisitionLockTimeoutMs(15000)
            .setResponses(responses)
            .setNodeEndpoints(endpoints);
    }

    static DescribeShareGroupOffsetsRequestData describeOffsetsRequest() {
        return new DescribeShareGroupOffsetsRequestData().setGroups(List.of(
            new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                .setGroupId("g1").setTopics(null),
            new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestGroup()
                .setGroupId("g2").setTopics(List.of(
                    new DescribeShareGroupOffsetsRequestData.DescribeShareGroupOffsetsRequestTopic()
                        .setTopicName("orders").setPartitions(List.of(0, 1, 2))))));
    }

    static DescribeShareGroupOffsetsResponseData describeOffsetsResponse() {
        return new DescribeShareGroupOffsetsResponseData().setGroups(List.of(
            new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseGroup()
                .setGroupId("g1")
                .setTopics(List.of(new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseTopic()
                    .setTopicName("orders")
                    .setTopicId(TOPIC_A)
                    .setPartitions(List.of(
                        new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponsePartition()
                            // Lag is ignorable, v1+: dropped at v0.
                            .setPartitionIndex(0).setStartOffset(42).setLeaderEpoch(5).setLag(7),
                        new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponsePartition()
                            .setPartitionIndex(1).setStartOffset(-1).setLeaderEpoch(-1)
                            .setErrorCode(UNKNOWN_TOPIC_OR_PARTITION).setErrorMessage("unknown partition"))))),
            new DescribeShareGroupOffsetsResponseData.DescribeShareGroupOffsetsResponseGroup()
                .setGroupId("g2")
                .setErrorCode(GROUP_ID_NOT_FOUND)
                .setErrorMessage("Group g2 not found.")));
    }

    static AlterShareGroupOffsetsRequestData alterOffsetsRequest() {
        AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopicCollection topics =
            new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopicCollection();
        topics.add(new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestTopic()
            .setTopicName("orders")
            .setPartitions(List.of(
                new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestPartition()
                    .setPartitionIndex(0).setStartOffset(0),
                new AlterShareGroupOffsetsRequestData.AlterShareGroupOffsetsRequestPartition()
                    .setPartitionIndex(1).setStartOffset(1234567890123L))));
        return new AlterShareGroupOffsetsRequestData().setGroupId("g1").setTopics(topics);
    }

    static AlterShareGroupOffsetsResponseData alterOffsetsResponse() {
        AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopicCollection topics =
            new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopicCollection();
        topics.add(new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponseTopic()
            .setTopicName("orders")
            .setTopicId(TOPIC_A)
            .setPartitions(List.of(
                new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponsePartition().setPartitionIndex(0),
                new AlterShareGroupOffsetsResponseData.AlterShareGroupOffsetsResponsePartition()
                    .setPartitionIndex(9).setErrorCode(UNKNOWN_TOPIC_OR_PARTITION).setErrorMessage("no partition 9"))));
        return new AlterShareGroupOffsetsResponseData().setResponses(topics);
    }

    static DeleteShareGroupOffsetsResponseData deleteOffsetsResponse() {
        return new DeleteShareGroupOffsetsResponseData()
            .setThrottleTimeMs(1)
            .setResponses(List.of(
                new DeleteShareGroupOffsetsResponseData.DeleteShareGroupOffsetsResponseTopic()
                    .setTopicName("orders").setTopicId(TOPIC_A),
                new DeleteShareGroupOffsetsResponseData.DeleteShareGroupOffsetsResponseTopic()
                    .setTopicName("gone").setErrorCode(UNKNOWN_TOPIC_OR_PARTITION).setErrorMessage("no such topic")));
    }

    static ListGroupsResponseData listGroupsResponse() {
        return new ListGroupsResponseData().setGroups(List.of(
            new ListGroupsResponseData.ListedGroup()
                .setGroupId("g1").setProtocolType("consumer").setGroupState("Stable").setGroupType("consumer"),
            new ListGroupsResponseData.ListedGroup()
                .setGroupId("q1").setProtocolType("share").setGroupState("Empty").setGroupType("share")));
    }

    static DescribeGroupsResponseData describeGroupsResponse(int version) {
        return new DescribeGroupsResponseData().setGroups(List.of(
            new DescribeGroupsResponseData.DescribedGroup()
                .setGroupId("g1")
                .setGroupState("Stable")
                .setProtocolType("consumer")
                .setProtocolData("range")
                .setMembers(List.of(new DescribeGroupsResponseData.DescribedGroupMember()
                    .setMemberId("m-1")
                    .setClientId("c")
                    .setClientHost("/127.0.0.1")
                    .setMemberMetadata(new byte[] {1, 2})
                    .setMemberAssignment(new byte[] {3})))
                .setAuthorizedOperations(0x0da8),
            new DescribeGroupsResponseData.DescribedGroup()
                .setErrorCode(GROUP_ID_NOT_FOUND)
                // ErrorMessage is v6+ and not ignorable: v5 refuses a non-null one.
                .setErrorMessage(version >= 6 ? "Group missing not found." : null)
                .setGroupId("missing")
                .setGroupState("Dead")));
    }

    /** One line per version: the value built for that version, written and read back. */
    static void emit(String name, IntFunction<Message> sample, int low, int high) throws Exception {
        for (int version = low; version <= high; version++) {
            Message message = sample.apply(version);
            byte[] data = serialize(message, (short) version);
            Message back = read(message.getClass(), data, (short) version);
            byte[] again = serialize(back, (short) version);
            if (!Arrays.equals(data, again)) {
                throw new IllegalStateException(name + " v" + version + " does not round-trip in Java");
            }
            String messageName = message.getClass().getSimpleName().replaceFirst("Data$", "");
            System.out.println(name + " " + messageName + " " + version + " " + HexFormat.of().formatHex(data));
        }
    }

    static byte[] serialize(Message message, short version) {
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = message.size(cache, version);
        ByteBuffer buffer = ByteBuffer.allocate(size);
        message.write(new ByteBufferAccessor(buffer), cache, version);
        if (buffer.hasRemaining()) {
            throw new IllegalStateException("size() and write() disagree");
        }
        return buffer.array();
    }

    static Message read(Class<? extends Message> type, byte[] data, short version) throws Exception {
        Constructor<? extends Message> constructor = type.getConstructor(Readable.class, short.class);
        return constructor.newInstance(new ByteBufferAccessor(ByteBuffer.wrap(data)), version);
    }

    static byte[] bytesOf(ByteBuffer buffer) {
        ByteBuffer copy = buffer.duplicate();
        byte[] out = new byte[copy.remaining()];
        copy.get(out);
        return out;
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
