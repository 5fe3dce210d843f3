// kafkajs over TLS / SASL, one scenario per run; prints one JSON document.
// Usage: WEIR_KAFKAJS_SECURITY='{"ssl":{"caFile":...,"certFile":...,"keyFile":...},
//   "sasl":{"mechanism":"scram-sha-256","username":...,"password":...}}' \
//   node security.js BOOTSTRAP SCENARIO TOPIC
// (compat_tests/security_harness.py kafkajs_json builds the variable.)
// Scenarios: "round-trip" (produce 10 values, read them back in a group),
// "connect" (an admin lists topics; prints the error kafkajs raises, if any).
"use strict";
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

const [bootstrap, scenario, topic] = process.argv.slice(2);
const RECORDS = 10;

function securityOptions(document) {
  const options = {};
  if (document.ssl) {
    const ssl = { rejectUnauthorized: true };
    if (document.ssl.caFile) ssl.ca = [fs.readFileSync(document.ssl.caFile, "utf8")];
    if (document.ssl.certFile) ssl.cert = fs.readFileSync(document.ssl.certFile, "utf8");
    if (document.ssl.keyFile) ssl.key = fs.readFileSync(document.ssl.keyFile, "utf8");
    options.ssl = ssl;
  }
  if (document.sasl) {
    const { mechanism, username, password, tokenFile } = document.sasl;
    options.sasl =
      mechanism === "oauthbearer"
        ? { mechanism, oauthBearerProvider: async () => ({ value: fs.readFileSync(tokenFile, "utf8").trim() }) }
        : { mechanism, username, password };
  }
  return options;
}

const kafka = new Kafka({
  clientId: "weir-compat-kafkajs-security",
  brokers: [bootstrap],
  logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
  connectionTimeout: 5000,
  authenticationTimeout: 5000,
  retry: { retries: 2, initialRetryTime: 200 },
  ...securityOptions(JSON.parse(process.env.WEIR_KAFKAJS_SECURITY || "{}")),
});

async function roundTrip() {
  const producer = kafka.producer();
  await producer.connect();
  const values = Array.from({ length: RECORDS }, (_, i) => `secured-${i}`);
  try {
    await producer.send({ topic, acks: -1, messages: values.map((value) => ({ value })) });
  } finally {
    await producer.disconnect();
  }
  const consumer = kafka.consumer({ groupId: `${topic}-js` });
  await consumer.connect();
  const read = [];
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`read ${read.length} of ${RECORDS}`)), 30000);
      consumer.run({
        eachMessage: async ({ message }) => {
          read.push(message.value.toString());
          if (read.length === RECORDS) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
  return { read: read.sort() };
}

async function connect() {
  const admin = kafka.admin();
  try {
    await admin.connect();
    await admin.listTopics();
    return { error: null };
  } catch (error) {
    const cause = error.cause || error.originalError || {};
    return { error: error.name, type: error.type || null, message: error.message, cause: cause.code || cause.name || null };
  } finally {
    await admin.disconnect();
  }
}

const scenarios = { "round-trip": roundTrip, connect };
scenarios[scenario]()
  .then((result) => {
    console.log(JSON.stringify(result));
    process.exit(0);
  })
  .catch((error) => {
    console.log(JSON.stringify({ error: error.name, message: error.message }));
    process.exit(1);
  });
