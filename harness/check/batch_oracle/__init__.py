"""The batch oracle (`[pipeline] kind = "job"`, `oracle = "batch"`): a user's own job run by
Spark as a batch over the records the stream read, compared with the sink (issue 47).

    oracle.py          the registry's entry for a job (`JobPipeline`) and the comparison (`check`)
    spark_run.py       its Spark run, from the harness: the records the committed batches read,
                       taken from the case's recording, a request, and the program started in a
                       process of its own (`run`, `oracle_dir`, `rechecking`, `RecordsMissing`)
    server.py          during a run, that program's Spark session kept across the run's cases
                       (`serving`, `OracleServer`: workloads/pipelines/oracle_server.py)
    job_input.py       what the job runs on: the records the committed batches read, each once,
                       and which of them Spark was entitled to drop as late (`Input`)
    job_result.py      what a job's oracle (this one, or the reference one) returns: a
                       CheckResult with the notes its verdict must carry
    foreach_tables.py  for `sink = "foreach_batch"`: each table the user's write_batch wrote,
                       against its twin
    reference.py       `oracle = "reference"`, for a job a batch run cannot mirror: the case
                       against the same case run first without its faults

Its Spark program runs outside the harness's process: workloads/pipelines/job_batch.py, over
the records workloads/recorder.py saved (workloads/records.py).
"""
