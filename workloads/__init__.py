"""Everything that runs outside the harness process: the generator, the Spark pipelines,
the sinks and the driver program. Imports nothing from `harness` or `faults`.

  errors      Problem (a problem and its fix), SpecError, Interrupted
  wire        the event's wire format: JSON fields, Kafka key, Spark schema
  progress    progress lines on a terminal or a pipe
  generator/  load: shapes, keys, out-of-order time, Kafka sending, ground truth
  pipelines/  the streaming queries, their registry, and the driver program
  sinks/      foreachBatch writers, each with a reader that sees what a consumer sees
"""
