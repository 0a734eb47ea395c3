package main

// usage is rollup-bench's help: the benchmarks and examples.
const usage = `usage: rollup-bench <benchmark> [flags]

Benchmarks (package internal/bench; numbers go to docs/benchmarks.md):
  mongod        unordered bulk upserts through the official driver on a unique
                (id, type, timestamp) index, against the embedded server (or --mongodb-uri)
  changestream  events/s one change-stream consumer drains while writers upsert, and event
                latency (write acknowledged -> event received) at a fixed write rate
  ingest        end to end: simulated agents -> HTTP API -> bulk writer -> store, against raw
                driver bulk upserts of the same documents (same fields, same indexes) in the
                same run; agents are a load generator (--client loadgen) or the agent client
                package over net/http (--client agentclient)
  baselines     rollup against the original design (upsert + $inc on every ancestor) and a
                per-tick re-aggregation: leaves/s, freshness, store commands, totals under faults
  runaway       one project's agent at a steady pace while another project's agent sends
                1,000 requests/s: the first one's latency alone, with the per-token limits,
                and without them
  scale         rollup as deployed (rollup mongod, trees imported, rollup serve processes) at
                10k to 1M leaves per tick or many projects: ingest leaves/s, last leaf -> root
                correct, store commands per tick, CPU and peak RSS of serve and the store

A benchmark's --mongodb-uri is read from the command line only: an operator's
ROLLUP_MONGODB_URI never points a benchmark (which creates and drops databases) at a deployment.

Examples:
  rollup-bench mongod                       # 1,000,000 upserts, in memory
  rollup-bench mongod --durable             # the same with a data directory (fsync before ack)
  rollup-bench mongod --n 200000 --batch 500
  rollup-bench changestream --rate 10000 --duration 5s
  rollup-bench ingest --agents 10000 --leaves 10 --ticks 3
  rollup-bench ingest --client agentclient  # agents through api/agentclient on the same cores
  rollup-bench ingest --phaseprofile pp     # CPU profiles of each path apart: pp.ingest.N, pp.raw.N
  rollup-bench baselines --faults
  rollup-bench scale --leaves 100000 --ticks 5
  rollup-bench scale --projects 1000 --leaves 1000 --instances 1,2,1,2 --partitions 4
  rollup-bench runaway --duration 20s

Flags: 'rollup-bench <benchmark> --help'.

Exit status: 0 success, 1 failure (for scale: a root not correct), 2 usage error.
A first SIGINT or SIGTERM shuts down gracefully; a second one exits at once (status 1).
`
