"""Push subscriptions: records of a topic POSTed to an HTTP(S) URL, through a share
group per subscription, by each partition's leader (docs/http-push.md)."""
