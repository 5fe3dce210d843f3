// kafkajs against a Weir broker, one scenario per run; prints one JSON document.
// Usage: node client.js BOOTSTRAP SCENARIO TOPIC [ARG]; KAFKAJS_DEBUG=1 logs every request to stderr.
"use strict";
const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require("kafkajs");

const [bootstrap, scenario, topic, arg] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: "weir-compat-kafkajs",
  brokers: [bootstrap],
  logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
  retry: { retries: 3 },
});

async function admin() {
  const client = kafka.admin();
  await client.connect();
  try {
    const validateOnly = await client.createTopics({
      validateOnly: true,
      waitForLeaders: false,
      topics: [{ topic, numPartitions: 3 }],
    });
    const created = await client.createTopics({ topics: [{ topic, numPartitions: 3 }] });
    let badName = null;
    try {
      await client.createTopics({ topics: [{ topic: "bad name!", numPartitions: 1 }] });
    } catch (error) {
      badName = (error.errors && error.errors[0] && error.errors[0].type) || error.type || error.name;
    }
    const listed = await client.listTopics();
    const metadata = await client.fetchTopicMetadata({ topics: [topic] });
    await client.createPartitions({ topicPartitions: [{ topic, count: 4 }] });
    const grown = await client.fetchTopicMetadata({ topics: [topic] });
    const offsets = await client.fetchTopicOffsets(topic);
    await client.deleteTopics({ topics: [topic] });
    const afterDelete = await client.listTopics();
    return {
      validateOnly,
      created,
      badName,
      listed: listed.includes(topic),
      partitions: metadata.topics[0].partitions.length,
      grownPartitions: grown.topics[0].partitions.length,
      offsets: offsets.map((o) => [o.partition, o.low, o.high]),
      deleted: !afterDelete.includes(topic),
    };
  } finally {
    await client.disconnect();
  }
}

async function produce() {
  const producer = kafka.producer({ idempotent: arg === "idempotent", maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const results = [];
    for (let batch = 0; batch < 5; batch++) {
      const messages = [];
      for (let i = 0; i < 20; i++) {
        const n = batch * 20 + i;
        messages.push({ key: `k${n % 7}`, value: `v${n}`, headers: { n: String(n) } });
      }
      const sent = await producer.send({
        topic,
        acks: -1,
        compression: batch % 2 ? CompressionTypes.GZIP : CompressionTypes.None,
        messages,
      });
      results.push(...sent.map((r) => [r.partition, Number(r.baseOffset)]));
    }
    return { sent: results };
  } finally {
    await producer.disconnect();
  }
}

async function consumeGroup() {
  const wanted = Number(arg);
  const consumer = kafka.consumer({ groupId: `kafkajs-${topic}`, sessionTimeout: 10000 });
  await consumer.connect();
  const values = [];
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${values.length} messages`)), 30000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            values.push(message.value.toString());
            if (values.length >= wanted) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  const client = kafka.admin();
  await client.connect();
  try {
    const committed = await client.fetchOffsets({ groupId: `kafkajs-${topic}`, topics: [topic] });
    const offsets = committed[0].partitions.map((p) => [p.partition, Number(p.offset)]);
    return { values, committed: offsets };
  } finally {
    await client.disconnect();
  }
}

function withAdmin(body) {
  return async () => {
    const client = kafka.admin();
    await client.connect();
    try {
      return await body(client);
    } finally {
      await client.disconnect();
    }
  };
}

async function errorTypeOf(promise) {
  try {
    await promise;
    return null;
  } catch (wrapped) {
    // kafkajs's retrier wraps what the broker said in a KafkaJSNonRetriableError's cause.
    const error = wrapped.cause || wrapped;
    const first = (error.errors && error.errors[0]) || (error.partitions && error.partitions[0]);
    return (first && (first.type || (first.error && first.error.type))) || error.type || error.name;
  }
}

// Topic configs as kafkajs sees them: {name: [value, isDefault]} for the asked names.
async function topicConfigs(client, names) {
  const { resources } = await client.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: names }],
  });
  return Object.fromEntries(
    resources[0].configEntries.map((e) => [e.configName, [e.configValue, e.isDefault]])
  );
}

function alterTopic(client, entries, validateOnly = false) {
  return client.alterConfigs({
    validateOnly,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: entries }],
  });
}

const configs = withAdmin(async (client) => {
  const names = ["retention.ms", "cleanup.policy"];
  await client.createTopics({
    topics: [{ topic, numPartitions: 1, configEntries: [{ name: "retention.ms", value: "3600000" }] }],
  });
  const created = await topicConfigs(client, names);
  await alterTopic(client, [{ name: "retention.ms", value: "60000" }], true);
  const afterValidateOnly = await topicConfigs(client, names);
  await alterTopic(client, [{ name: "cleanup.policy", value: "compact" }]);
  const afterAlter = await topicConfigs(client, names);
  const unknownName = await errorTypeOf(alterTopic(client, [{ name: "no.such.config", value: "1" }]));
  const badValue = await errorTypeOf(alterTopic(client, [{ name: "retention.ms", value: "soon" }]));
  return { created, afterValidateOnly, afterAlter, unknownName, badValue };
});

// Writes `count` records to partition 0 with timestamps base + 1000*i, then asks for offsets.
const timestamps = withAdmin(async (client) => {
  const base = Number(arg);
  const producer = kafka.producer({ idempotent: false });
  await producer.connect();
  try {
    await producer.send({
      topic,
      acks: -1,
      messages: [0, 1, 2, 3, 4].map((i) => ({
        partition: 0,
        value: `t${i}`,
        timestamp: String(base + 1000 * i),
      })),
    });
  } finally {
    await producer.disconnect();
  }
  const at = async (ms) => (await client.fetchTopicOffsetsByTimestamp(topic, ms)).map((o) => [o.partition, o.offset]);
  return {
    beforeAll: await at(base - 1),
    exact: await at(base + 2000),
    between: await at(base + 2500),
    afterAll: await at(base + 10000),
  };
});

const deleteRecords = withAdmin(async (client) => {
  await client.fetchTopicMetadata({ topics: [topic] });
  await client.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "3" }] });
  const afterDelete = await client.fetchTopicOffsets(topic);
  await client.deleteTopicRecords({ topic, partitions: [{ partition: 1, offset: "-1" }] });
  const afterDeleteAll = await client.fetchTopicOffsets(topic);
  const beyondHigh = await errorTypeOf(
    client.deleteTopicRecords({ topic, partitions: [{ partition: 2, offset: "1000" }] })
  );
  const watermarks = (offsets) => offsets.map((o) => [o.partition, o.low, o.high]);
  return { afterDelete: watermarks(afterDelete), afterDeleteAll: watermarks(afterDeleteAll), beyondHigh };
});

// Explicit partitions, so the offsets each record gets are known in advance. ARG is the acks.
async function produceExact() {
  const producer = kafka.producer({ idempotent: false, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    const sent = [];
    for (let batch = 0; batch < 4; batch++) {
      const messages = [];
      for (let i = 0; i < 30; i++) {
        const n = batch * 30 + i;
        messages.push({
          partition: n % 3,
          key: n % 10 === 0 ? null : `key-${n}`,
          value: n % 15 === 0 ? null : `value-${n}`,
          headers: { n: String(n), bin: Buffer.from([n % 256, 0, 255]), multi: ["a", `b${n}`] },
        });
      }
      const results = await producer.send({
        topic,
        acks: Number(arg),
        compression: batch % 2 ? CompressionTypes.GZIP : CompressionTypes.None,
        messages,
      });
      sent.push(...results.map((r) => [r.partition, Number(r.baseOffset), r.errorCode]));
    }
    return { sent };
  } finally {
    await producer.disconnect();
  }
}

// One send of ARG keyed records with the default (murmur2) partitioner.
async function produceMany() {
  const producer = kafka.producer({ idempotent: false });
  await producer.connect();
  try {
    const messages = [];
    for (let n = 0; n < Number(arg); n++) {
      messages.push({ key: `k${n}`, value: `v${n}` });
    }
    const results = await producer.send({ topic, acks: -1, compression: CompressionTypes.GZIP, messages });
    return { sent: results.map((r) => [r.partition, Number(r.baseOffset)]) };
  } finally {
    await producer.disconnect();
  }
}

// A transactional producer's values, one send per transaction.
function transactionalProducer(id) {
  return kafka.producer({ transactionalId: id, idempotent: true, maxInFlightRequests: 1 });
}

async function sendInTransaction(producer, values, end) {
  const transaction = await producer.transaction();
  try {
    await transaction.send({ topic, acks: -1, messages: values.map((value) => ({ partition: 0, value })) });
  } catch (error) {
    await transaction.abort();
    throw error;
  }
  await (end === "commit" ? transaction.commit() : transaction.abort());
}

// Reads partition 0 from the beginning in a fresh group until it sees `last`.
async function readUntil(readUncommitted, last) {
  const consumer = kafka.consumer({
    groupId: `kafkajs-${topic}-${readUncommitted ? "uncommitted" : "committed"}`,
    readUncommitted,
    sessionTimeout: 10000,
  });
  await consumer.connect();
  const values = [];
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`did not reach ${last}: ${values}`)), 30000);
      consumer
        .run({
          eachMessage: async ({ message }) => {
            values.push(message.value.toString());
            if (values[values.length - 1] === last) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return values;
}

// Commit, abort, commit; then what a read_committed and a read_uncommitted consumer see.
async function transactions() {
  const producer = transactionalProducer(`kafkajs-txn-${topic}`);
  await producer.connect();
  try {
    await sendInTransaction(producer, ["c1-a", "c1-b"], "commit");
    await sendInTransaction(producer, ["a1-a", "a1-b"], "abort");
    await sendInTransaction(producer, ["c2-a", "c2-b"], "commit");
  } finally {
    await producer.disconnect();
  }
  return {
    readCommitted: await readUntil(false, "c2-b"),
    readUncommitted: await readUntil(true, "c2-b"),
  };
}

// Group offsets sent in a committed transaction are committed; in an aborted one they are not.
// EndTxn answers before the markers are written, so each check is made inside the next
// transaction, after its first send: AddPartitionsToTxn answers CONCURRENT_TRANSACTIONS
// (kafkajs retries) until the previous transaction's markers are all written.
const transactionOffsets = withAdmin(async (client) => {
  const groupId = `kafkajs-txn-offsets-${topic}`;
  const committedOffset = async () => {
    const [fetched] = await client.fetchOffsets({ groupId, topics: [topic] });
    return fetched.partitions.filter((p) => p.partition === 0).map((p) => p.offset)[0];
  };
  const producer = transactionalProducer(`kafkajs-txn-offsets-${topic}`);
  await producer.connect();
  const begin = async (value) => {
    const transaction = await producer.transaction();
    await transaction.send({ topic, acks: -1, messages: [{ partition: 0, value }] });
    return transaction;
  };
  const sendOffset = (transaction, offset) =>
    transaction.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions: [{ partition: 0, offset }] }] });
  try {
    const before = await committedOffset();
    const first = await begin("t1");
    await sendOffset(first, "5");
    await first.commit();
    const second = await begin("t2");
    const afterCommit = await committedOffset();
    await sendOffset(second, "9");
    await second.abort();
    const third = await begin("t3");
    const afterAbort = await committedOffset();
    await third.commit();
    return { before, afterCommit, afterAbort };
  } finally {
    await producer.disconnect();
  }
});

const scenarios = {
  admin,
  produce,
  "consume-group": consumeGroup,
  configs,
  timestamps,
  "delete-records": deleteRecords,
  "produce-exact": produceExact,
  "produce-many": produceMany,
  transactions,
  "transaction-offsets": transactionOffsets,
};
scenarios[scenario]()
  .then((result) => {
    process.stdout.write(JSON.stringify(result) + "\n");
    process.exit(0);
  })
  .catch((error) => {
    process.stdout.write(JSON.stringify({ error: String(error && error.stack) }) + "\n");
    process.exit(1);
  });
