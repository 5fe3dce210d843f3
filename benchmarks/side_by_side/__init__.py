"""The side-by-side benchmark that `benchmarks/run.py` runs (its docstring says
what it measures and how; its command line is there too). One module a part:

- progress: the progress lines on stderr;
- cpu: CPU seconds of a process tree, of this process and of the machine;
- brokers: Weir, Tansu and Kafka started and stopped on free loopback ports;
- limits: the machine's limits (fio with fdatasync, iperf3 over loopback);
- confluent_load: produce and consume with confluent-kafka in this process;
- perf_tools_load: Kafka's producer and consumer perf tools, in their own JVMs;
- profiling: py-spy around a phase, and its samples summed up;
- passes: one broker's pass of a round (warm-up, then every size's phases);
- report: medians over the rounds and the markdown tables.
- secured: `--security sasl_ssl`: the secured brokers and the generators' logins;
- security_report: each broker's SASL_SSL / PLAINTEXT ratios, side by side.

Imported as `side_by_side` (benchmarks/ is on sys.path when run.py runs), like
`kafka_peer`.
"""
