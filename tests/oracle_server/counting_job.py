"""Jobs for tests/test_oracle_server.py: a running total kept in a module-level dict of the Python
worker (the planted bug's shape), whose batch answer is right only in a worker no run used before;
and a job that fails."""

import pandas as pd
from pyspark.sql import functions as F

TOTALS: dict[str, int] = {}
BUILT = []   # in the driver: how often this module's build ran since it was imported


def _count(frame: pd.DataFrame) -> pd.DataFrame:
    user = frame["user"].iloc[0]
    TOTALS[user] = TOTALS.get(user, 0) + len(frame)
    return pd.DataFrame({"user": [user], "clicks": [TOTALS[user]], "builds": [0]})


def totals_in_a_dict(df):
    BUILT.append(1)
    out = df.groupBy("user").applyInPandas(_count, "user STRING, clicks LONG, builds LONG")
    return out.withColumn("builds", F.lit(len(BUILT)).cast("long"))


def fails(df):
    raise RuntimeError("this job fails on purpose")
