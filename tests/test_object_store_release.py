"""The release on an object store, against a real S3-compatible server on localhost (moto):
incomplete multipart uploads of temporary keys, credentials in URIs, a dead
endpoint.  Each test failed on the code before."""
import socket

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from s3_server import s3_server

from iwpfast.cli import main
from iwpfast.exceptions import InvalidInputError
from iwpfast.privacy import ReleaseSpec, release

KEY, SECRET = "AKIDLEAKME1", "SECRETLEAKME2"


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        server.filesystem().create_dir("bkt")
        r = np.random.default_rng(0)
        for i in range(2):
            pq.write_table(pa.table({"a": r.uniform(0, 1, 400), "y": r.integers(0, 2, 400)}),
                           f"bkt/raw/f{i}.parquet", filesystem=server.filesystem())
        yield server


def _spec():
    return ReleaseSpec(epsilon_x=1.0, delta=1e-5, bound=1.0, epsilon_y=1.0, features=("a",),
                       ranges={"a": (0, 1)}, label="y")


def _boto(s3):
    import boto3

    return boto3.client("s3", endpoint_url=f"http://{s3.endpoint}", region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def test_incomplete_uploads_of_temporary_keys_are_refused_or_aborted(s3):
    client = _boto(s3)
    # what a writer killed in the middle of a large part leaves: an upload never completed
    key = "rel/.part-000001.parquet.0123456789ab.tmp"
    upload = client.create_multipart_upload(Bucket="bkt", Key=key)
    client.upload_part(Bucket="bkt", Key=key, PartNumber=1, UploadId=upload["UploadId"],
                       Body=b"noisy rows" * 1000)
    with pytest.raises(InvalidInputError, match="incomplete upload"):
        release(s3.uri("bkt/raw/"), s3.uri("bkt/rel/"), _spec())
    assert [u["Key"] for u in client.list_multipart_uploads(Bucket="bkt").get("Uploads", [])] == [key]
    with pytest.warns(UserWarning, match="removed 1 file"):
        release(s3.uri("bkt/raw/"), s3.uri("bkt/rel/"), _spec(), overwrite=True)
    assert client.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []
    assert s3.keys("bkt/rel") == ["bkt/rel/_iwpfast_manifest.json", "bkt/rel/part-000000.parquet",
                                  "bkt/rel/part-000001.parquet"]


def _credentialed(s3, path):
    return s3.uri(path).replace("s3://", f"s3://{KEY}:{SECRET}@")


def _run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_credentials_never_printed_by_any_command(s3, capsys, tmp_path):
    raw = _credentialed(s3, "bkt/raw/f0.parquet")
    rel = _credentialed(s3, "bkt/cred/rel.parquet")
    runs = {
        "release": ["release", raw, rel, "--features", "a=0:1", "--label", "y", "--epsilon-x", "1",
                    "--epsilon-y", "1", "--bound", "1", "--seed", "1"],
        "info": ["info", rel],
        "info --json": ["info", rel, "--json"],
        "fit": ["fit", rel, "--out", _credentialed(s3, "bkt/cred/model.json"), "--alpha", "0.1",
                "--learning-rate", "0.05"],
        "evaluate": ["evaluate", _credentialed(s3, "bkt/cred/model.json"), rel],
        "tune": ["tune", rel, "--out", str(tmp_path / "tuned.json")],
        "missing": ["info", _credentialed(s3, "bkt/cred/nope.parquet")],
        "bad release": ["release", raw, _credentialed(s3, "bkt/cred/rel.parquet"), "--features",
                        "a=0:1", "--label", "y", "--epsilon-x", "1", "--epsilon-y", "1", "--bound",
                        "1"],
    }
    codes = {}
    for name, argv in runs.items():
        code, text = _run(capsys, argv)
        codes[name] = code
        assert KEY not in text and SECRET not in text, (name, text)
        if name != "info --json":
            assert "bkt/" in text, (name, text)            # the location itself is still named
    assert codes["release"] == codes["info"] == codes["fit"] == codes["tune"] == 0
    # sysexits: a missing object is missing input (66); the refused release a usage error (2)
    assert codes["missing"] == 66 and codes["bad release"] == 2


def test_credentials_redacted_from_error_messages():
    from iwpfast.exceptions import redact_credentials

    text = (f"'s3://{KEY}:{SECRET}@bkt/x' and gs://u:p@b/y, "
            f"s3://b/k?endpoint_override=h:1&secret_key={SECRET}&access_key={KEY}")
    clean = redact_credentials(text)
    assert KEY not in clean and SECRET not in clean and ":p@" not in clean
    assert "'s3://bkt/x'" in clean and "gs://b/y" in clean and "endpoint_override=h:1" in clean
    assert SECRET not in str(InvalidInputError(text))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_endpoint_is_one_error_line_with_bounded_retries(capsys):
    from iwpfast.io.filesystem import S3_CONNECT_TIMEOUT_S, S3_MAX_ATTEMPTS, resolve

    uri = (f"s3://{KEY}:{SECRET}@bkt/x.parquet?endpoint_override=127.0.0.1:{_closed_port()}"
           f"&scheme=http&region=us-east-1")
    settings = resolve(uri).fs.__reduce__()[1][0]
    assert settings["connect_timeout"] == S3_CONNECT_TIMEOUT_S == 5.0 and S3_MAX_ATTEMPTS == 3
    for argv in (["info", uri], ["fit", uri, "--out", "m.json", "--features", "a", "--label", "y",
                                 "--noise-var", "0.1"]):
        code, text = _run(capsys, argv)
        lines = text.strip().splitlines()
        # an unreachable endpoint: service unavailable (69), one line
        assert code == 69 and len(lines) == 1 and lines[0].startswith("iwpfast: error:"), text
        assert "Traceback" not in text and SECRET not in text and KEY not in text


def test_a_single_file_release_removes_a_killed_runs_staging_key_and_upload(s3):
    """Issue 35: a killed single-file release left a staging key (or an incomplete multipart
    upload of one); the next run into the destination removes both before it writes."""
    client = _boto(s3)
    staged = "single/.out.parquet.0123456789ab.tmp"
    client.put_object(Bucket="bkt", Key=staged, Body=b"noisy rows")
    upload = client.create_multipart_upload(Bucket="bkt", Key="single/.out.parquet.abcdefabcdef.tmp")
    client.upload_part(Bucket="bkt", Key="single/.out.parquet.abcdefabcdef.tmp", PartNumber=1,
                       UploadId=upload["UploadId"], Body=b"noisy rows" * 100)
    client.put_object(Bucket="bkt", Key="single/.other.parquet.0123456789ab.tmp", Body=b"not ours")
    with pytest.warns(UserWarning, match="removed 2 staging file"):
        release(s3.uri("bkt/raw/f0.parquet"), s3.uri("bkt/single/out.parquet"), _spec())
    assert s3.keys("bkt/single") == ["bkt/single/.other.parquet.0123456789ab.tmp",
                                     "bkt/single/out.parquet"]
    assert client.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []


def test_a_failed_multipart_release_leaves_no_marker_object(s3):
    """pyarrow keeps a 0-byte ``prefix/`` object when the last key under a prefix is deleted: a
    failed release removes it too (nothing is left at the destination)."""
    client = _boto(s3)
    fs = s3.filesystem()
    pq.write_table(pa.table({"a": [0.5, 0.2]}), "bkt/bad/f1.parquet", filesystem=fs)   # no y
    pq.write_table(pa.table({"a": [0.5, 0.2], "y": [0, 1]}), "bkt/bad/f0.parquet", filesystem=fs)
    with pytest.raises(InvalidInputError, match="not found"):
        release(s3.uri("bkt/bad/"), s3.uri("bkt/failed/rel/"), _spec())
    listed = client.list_objects_v2(Bucket="bkt", Prefix="failed").get("Contents", [])
    assert listed == []
