"""How the driver program says why its query failed (status.json's `error`): without the
query's plan, with the JVM's root cause. The exception is built by hand, shaped as pyspark's
captured exceptions are (a py4j Throwable in `_origin`)."""

import pytest

from workloads.pipelines.driver import error_text

pytestmark = pytest.mark.unit


class Throwable:
    """A Java exception through py4j: toString() and getCause()."""

    def __init__(self, text, cause=None):
        self.text, self.cause = text, cause

    def toString(self):  # noqa: N802 - Java's name
        return self.text

    def getCause(self):  # noqa: N802
        return self.cause


class StreamingQueryException(Exception):
    def __init__(self, message, origin):
        super().__init__(message)
        self._origin = origin


STATE = "org.apache.spark.sql.execution.streaming.state.StateStoreCommitValidationFailed"
VALIDATION = "[STATE_STORE_COMMIT_VALIDATION_FAILED] State store commit validation failed for batch 4."


def test_the_plan_is_cut_and_the_root_cause_named():
    root = Throwable(f"{STATE}: {VALIDATION}\nExpected 2 commits but got 0.\n"
                     "Missing commits: (operator=0, partition=0)\nThis error ...")
    exc = StreamingQueryException(
        "[STREAM_FAILED] Query [id = q] terminated with exception: Exception thrown in awaitResult: "
        " SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: q\n~WriteToMicroBatchDataSourceV1 ...",
        Throwable("org.apache.spark.SparkException: Exception thrown in awaitResult",
                  Throwable("org.apache.spark.rpc.RpcException", root)))
    text = error_text(exc)
    assert "=== Streaming Query ===" not in text and "WriteToMicroBatch" not in text
    assert text.startswith("StreamingQueryException: [STREAM_FAILED]")
    assert text.endswith(f"(caused by {STATE}: {VALIDATION} Expected 2 commits but got 0. "
                         "Missing commits: (operator=0, partition=0))")


def test_a_python_error_is_its_class_and_message():
    assert error_text(ValueError("no such sink")) == "ValueError: no such sink"


def test_a_dead_jvm_leaves_the_message():
    class Gone(Throwable):
        def getCause(self):  # noqa: N802
            raise ConnectionError("py4j: the JVM is gone")

    assert error_text(StreamingQueryException("boom", Gone("x"))) == "StreamingQueryException: boom"


def test_py4j_s_first_line_is_followed_by_the_java_exception_not_its_stack():
    """py4j says only which call failed on its first line; the Java exception's message is on
    the next ones (a garbled checkpoint metadata file was reported as 'An error occurred while
    calling o211.start.' alone)."""
    class Py4JJavaError(Exception):
        pass

    exc = Py4JJavaError("An error occurred while calling o211.start.\n"
                        ": com.fasterxml.jackson.core.JsonParseException: Unexpected character\n"
                        " at [Source: REDACTED; line: 1, column: 1]\n"
                        "\tat com.fasterxml.jackson.core.JsonParser._constructReadException(...)\n")
    assert error_text(exc) == ("Py4JJavaError: An error occurred while calling o211.start. "
                               ": com.fasterxml.jackson.core.JsonParseException: Unexpected character")


def test_a_long_message_is_cut_so_that_the_root_cause_still_shows():
    """A corrupt state file failed the foreachBatch job: pages of a Python proxy traceback,
    and the reason (the state store could not be loaded) only in the innermost cause."""
    root = Throwable("java.io.EOFException: Stream ended prematurely")
    exc = StreamingQueryException("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user "
                                  "provided function. Traceback: " + "x" * 2000, Throwable("outer", root))
    text = error_text(exc)
    assert len(text) <= 600 and text.endswith("(caused by java.io.EOFException: Stream ended prematurely)")
    assert text.startswith("StreamingQueryException: [FOREACH_BATCH_USER_FUNCTION_ERROR]") and "..." in text
