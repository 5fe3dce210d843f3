"""A broker as a member of a cluster over etcd: the etcd client, registration, the
view of the cluster and the roles of the local replicas (`cluster_member`), with its
parts: the keys in etcd (`etcd_layout`), the watch (`metadata_watch`), a leader's
and the controller's duties (`leader_duties`, `controller_duties`) and replicas
offline after a storage error (`offline_replicas`); Kafka's ISR replication of each
partition (`replication`) and the follower's client of a leader (`peer_client`). A
single node has none of this (`Broker.cluster` is None); nothing here serves client
requests."""
