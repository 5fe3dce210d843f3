"""The web console: static pages whose scripts use the broker's HTTP API
(weir.broker.http.console.routes)."""
