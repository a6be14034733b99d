"""SDK-HMAC-SHA256 signing: the documented test vector, and byte-for-byte agreement with huaweicloudsdkcore."""

from __future__ import annotations

import json
from typing import Dict, List, Tuple

from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.sdk_request import SdkRequest
from huaweicloudsdkcore.signer.signer import Signer
from hypothesis import given, settings
from hypothesis import strategies as st
from malaunch.sdk.backends.modelarts.signer import canonical_query, canonical_request, sdk_date, sign_request

AK, SK = "AKEXAMPLE", "SKEXAMPLE"
HOST = "modelarts.cn-north-4.myhuaweicloud.com"
PATH = "/v2/0123456789abcdef/training-jobs"


def official(method: str, path: str, query: List[Tuple[str, str]], headers: Dict[str, str], body: bytes) -> str:
    request = SdkRequest(
        method=method, schema="https", host=HOST, resource_path=path, query_params=list(query),
        header_params=dict(headers), body=body,
    )  # fmt: skip
    Signer(BasicCredentials(AK, SK, "0123456789abcdef")).sign(request)
    return str(request.header_params["Authorization"])


def test_documented_vector() -> None:
    headers = {
        "Content-Type": "application/json",
        "X-Project-Id": "0123456789abcdef",
        "X-Sdk-Date": "20240101T000000Z",
        "Host": HOST,
    }
    body = b'{"kind":"job","metadata":{"name":"x"}}'
    query = [("limit", "10"), ("a", "b c")]
    text, signed = canonical_request("POST", PATH, query, headers, body)
    assert text == (
        "POST\n/v2/0123456789abcdef/training-jobs/\na=b%20c&limit=10\ncontent-type:application/json\n"
        f"host:{HOST}\nx-project-id:0123456789abcdef\nx-sdk-date:20240101T000000Z\n\n"
        "content-type;host;x-project-id;x-sdk-date\n750033643f57be61ac23c626a1b854854e6b97ed13979f55b41042e1d3ec0a91"
    )
    assert sign_request("POST", PATH, query, headers, body, ak=AK, sk=SK) == (
        "SDK-HMAC-SHA256 Access=AKEXAMPLE, SignedHeaders=content-type;host;x-project-id;x-sdk-date, "
        "Signature=b58b7d31bb6f33e402bed699c80b501a9a11c4bbfa21006960c7f3b9f40640e8"
    )
    assert canonical_query(query) == "a=b%20c&limit=10"
    assert signed == "content-type;host;x-project-id;x-sdk-date"


def test_date_format() -> None:
    assert sdk_date(0) == "19700101T000000Z"
    assert sdk_date(1704067200) == "20240101T000000Z"


_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    segments=st.lists(_text.filter(lambda s: "/" not in s and s not in (".", "..")), min_size=1, max_size=4),
    query=st.lists(st.tuples(_text, _text), max_size=4),
    body=st.one_of(st.just(b""), st.dictionaries(_text, _text, max_size=3).map(lambda d: json.dumps(d).encode())),
    token=st.one_of(st.none(), st.text(alphabet="abcdefXYZ0123456789+/=", min_size=1, max_size=40)),
    extra=st.dictionaries(st.sampled_from(["X-Custom", "x_skipped", "Accept", "X-Language"]), _text, max_size=3),
)
def test_agrees_with_huaweicloudsdkcore(
    method: str,
    segments: List[str],
    query: List[Tuple[str, str]],
    body: bytes,
    token: str,
    extra: Dict[str, str],
) -> None:
    path = "/v2/" + "/".join(segments)
    headers = {"Content-Type": "application/json", "Host": HOST, "X-Sdk-Date": "20260101T120000Z"}
    headers.update(extra)
    if token:
        headers["X-Security-Token"] = token
    mine = sign_request(method, path, query, headers, body, ak=AK, sk=SK)
    assert mine == official(method, path, query, headers, body)
