// kafkajs against a Weir broker, one scenario per run; prints one JSON document.
// Usage: node client.js BOOTSTRAP SCENARIO TOPIC [ARG]
"use strict";
const { Kafka, CompressionTypes, logLevel } = require("kafkajs");

const [bootstrap, scenario, topic, arg] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: "weir-compat-kafkajs",
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING,
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

const scenarios = { admin, produce, "consume-group": consumeGroup };
scenarios[scenario]()
  .then((result) => {
    process.stdout.write(JSON.stringify(result) + "\n");
    process.exit(0);
  })
  .catch((error) => {
    process.stdout.write(JSON.stringify({ error: String(error && error.stack) }) + "\n");
    process.exit(1);
  });
