"""Weir's security model, pure: principals, Kafka's ACLs and the authorizer's
decisions, the SASL mechanisms' server side, TLS principal mapping, and quota
arithmetic. No sockets, no Trio, no disk; time is an argument (`now_ms`)."""
