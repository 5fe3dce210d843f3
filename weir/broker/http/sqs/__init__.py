"""An SQS-compatible queue API on the broker's HTTP listener (docs/http-sqs.md).

The AWS SDKs' SQS JSON protocol (`POST /`, `X-Amz-Target: AmazonSQS.<Action>`,
`application/x-amz-json-1.0`): a queue is a Weir topic of the same name, marked by
its `weir.sqs.queue` topic config, consumed through the share group `sqs.<name>`.

- `routes`: the Starlette route and the action dispatch;
- `queues`: queue CRUD and attributes; `messaging`: send, receive, delete, visibility,
  purge; `backend`: the Kafka APIs and share-group operations they run on;
- pure parts: `errors` (SQS's error codes), `names` (queue name, URL, ARN, topic and
  group), `attributes` (queue attributes <-> configs), `message_attributes` (message
  attributes <-> record headers, SQS's MD5s), `receipts` (receipt handles),
  `sigv4` (AWS Signature Version 4 checks).
"""
