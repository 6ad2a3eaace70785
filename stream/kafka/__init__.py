"""All Kafka client code of the project, in one package: `configuration` (the broker's address,
TLS and SASL, the record size limit), `admin` (topics and metadata), `producer` (the producer
and its two ways of sending), `transactional` (a transactional producer per input partition),
`consumer` (the tools' consumers: topic waits, a fetch that waits out a broker gone away),
`ends` (where a topic ends, for a reader of committed records), `retry` (the one policy for a
broker that goes away and comes back), `internals` (every touch of Faust's and aiokafka's
private API). The worker, the sources, the tail and the consumers use it; `stream.brokers` only
launches local brokers."""
