"""`[workload] kind = "replay"`: a file of the user's own records sent through Kafka.

Modules, in the order data flows through them:
  spec      ReplaySpec: the [workload] keys, validated with the generator's (rate, delay, ...)
  records   the file read in blocks: each record's bytes, event time and key
  scan      one pass: count, event-time span, order statistics, the schema
  schema    a job's DDL checked against the first records
  pace      when each record is sent (a rate shape, or `speed` x the recorded pace, then delays)
  send      replay(): the generator's sender, anchors and report; ground truth; control records
  preview   what `python -m harness replay-preview FILE` prints

Nothing here imports pyspark: the job's side is workloads/pipelines/job.py.
"""
