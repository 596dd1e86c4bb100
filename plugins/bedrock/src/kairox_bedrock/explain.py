"""Bedrock failures in words: which botocore errors are retried, and the
:class:`~kairox_bedrock.BedrockError` (or ``QueryError``) each failure becomes, saying
what went wrong and the fix. boto3 is loaded whenever these run."""

from __future__ import annotations

from collections.abc import Mapping

from kairox import QueryError
from kairox_bedrock.config import BedrockConfig
from kairox_bedrock.errors import (
    BedrockAuthError,
    BedrockConnectionError,
    BedrockError,
    BedrockNotFoundError,
    BedrockTimeoutError,
    BedrockUnavailableError,
)

__all__ = ["explain", "is_botocore_error", "is_retryable", "retry_after"]

_THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
    }
)
_SERVER_CODES = frozenset(
    {
        "InternalServerException",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "BadGatewayException",
    }
)
_EXPIRED_CODES = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "UnauthorizedSSOTokenError"}
)
_BAD_KEY_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "MissingAuthenticationTokenException",
        "MissingAuthenticationToken",
        "IncompleteSignatureException",
        "NotAuthorized",
        "UnauthorizedException",
    }
)
_BAD_SIGNATURE_CODES = frozenset({"InvalidSignatureException", "SignatureDoesNotMatch"})
_DENIED_CODES = frozenset({"AccessDeniedException", "AccessDenied"})


def is_botocore_error(exc: Exception) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    return isinstance(exc, BotoCoreError | ClientError)


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return ""
    return str(response.get("Error", {}).get("Code") or "")


def _is_throttling(exc: Exception) -> bool:
    return _code(exc) in _THROTTLING_CODES or _status(exc) == 429


def is_retryable(exc: Exception) -> bool:
    """Throttling, 5xx and dropped or refused connections; never auth, 4xx or timeouts."""
    from botocore.exceptions import ClientError, ConnectionClosedError, ConnectionError

    if isinstance(exc, ClientError):
        status = _status(exc)
        return (
            _is_throttling(exc)
            or _code(exc) in _SERVER_CODES
            or (status is not None and status >= 500)
        )
    # Refused, reset or closed connections; not a read timeout, which used the whole deadline.
    return isinstance(exc, ConnectionError | ConnectionClosedError)


def retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    try:
        return float(headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


def explain(
    exc: Exception, name: str, config: BedrockConfig, endpoint: str, attempts: int
) -> Exception:
    """A :class:`BedrockError` (or ``QueryError``) saying what went wrong and the fix, for
    a failed call of knowledge base ``name`` to ``endpoint`` after ``attempts`` tries."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectionError,
        CredentialRetrievalError,
        NoCredentialsError,
        ParamValidationError,
        PartialCredentialsError,
        ReadTimeoutError,
        SSOError,
        TokenRetrievalError,
    )

    kb = f"knowledge base {name!r} (Bedrock id {config.knowledge_base_id!r}, region {config.region!r})"
    chain = _credential_chain(name, config)
    tries = f" after {attempts} attempts" if attempts > 1 else ""

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        message = str(error.get("Message") or "").strip() or "(no message)"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        said = f"{code or 'HTTP ' + str(status)}: {message}"
        if code in _EXPIRED_CODES:
            return BedrockAuthError(
                f"{kb}: the AWS credentials have expired ({said}). Fix: refresh them "
                "(`aws sso login`, new STS credentials or a new AWS_SESSION_TOKEN); "
                f"they come from {chain}",
                code=code,
            )
        if code in _BAD_SIGNATURE_CODES:
            return BedrockAuthError(
                f"{kb}: AWS rejected the request signature ({said}). Fix: the secret key "
                "does not belong to the access key id, or the request was signed for "
                "another region: check AWS_SECRET_ACCESS_KEY (or the profile's "
                f"aws_secret_access_key) and `region`; credentials come from {chain}",
                code=code,
            )
        if code in _DENIED_CODES:
            return BedrockAuthError(
                f"{kb}: access denied ({said}). Fix: the credentials are valid but lack "
                "permission: allow bedrock:Retrieve on this knowledge base for the "
                f"identity they belong to (from {chain}), and check that `region` and "
                "`knowledge_base_id` name the knowledge base you mean",
                code=code,
            )
        if code in _BAD_KEY_CODES or status in (401, 403):
            return BedrockAuthError(
                f"{kb}: AWS did not accept the credentials ({said}). Fix: check the "
                f"credentials, which come from {chain}; the access key may be deleted, "
                "inactive or from another AWS partition. Credentials never go in "
                "kairox.toml",
                code=code,
            )
        if code == "ResourceNotFoundException" or status == 404:
            return BedrockNotFoundError(
                f"{kb}: no knowledge base with id {config.knowledge_base_id!r} "
                f"in region {config.region!r} ({said}). Fix: check "
                f"`knowledge_base_id` and `region` in [knowledge_bases.{name}] "
                "(the id is the 10-character id shown in the Bedrock console), and that "
                "the credentials belong to the account that owns it",
                code=code,
            )
        if code == "ServiceQuotaExceededException":
            return BedrockUnavailableError(
                f"{kb}: a Bedrock service quota is exhausted ({said}). Fix: ask AWS for a "
                "higher quota (Service Quotas console), or send fewer queries",
                code=code,
            )
        if code == "DependencyFailedException":
            return BedrockUnavailableError(
                f"{kb}: the knowledge base's vector store failed ({said}). Fix: check that "
                "its store (OpenSearch Serverless, Aurora, Pinecone, ...) is running and "
                "reachable by Bedrock",
                code=code,
            )
        if code == "ValidationException" or status == 400:
            return QueryError(
                f"{kb}: Bedrock rejected the request as invalid ({said}). Fix: check this "
                "query's filters and the table's `filter`, `search_type` (HYBRID needs a "
                "vector store that supports it) and `number_of_results`"
            )
        if is_retryable(exc):
            what = "throttled the requests" if _is_throttling(exc) else "failed"
            return BedrockUnavailableError(
                f"{kb}: Bedrock {what}{tries} within the {config.timeout_ms} ms "
                f"budget ({said}, HTTP {status}). "
                + (
                    "Fix: send fewer queries, or ask AWS for a higher Retrieve quota"
                    if _is_throttling(exc)
                    else "This is usually transient: try again later"
                ),
                code=code,
                attempts=attempts,
            )
        return BedrockError(f"{kb}: Bedrock answered HTTP {status} ({said})", code=code)

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return BedrockAuthError(
            f"{kb}: no usable AWS credentials ({exc}). Fix: set AWS_ACCESS_KEY_ID and "
            'AWS_SECRET_ACCESS_KEY, or set aws_profile = "NAME" in '
            f"[knowledge_bases.{name}] (a profile of ~/.aws/config), or run where an "
            "instance or task role is available. Credentials never go in kairox.toml",
            code=type(exc).__name__,
        )
    if isinstance(exc, CredentialRetrievalError | TokenRetrievalError | SSOError):
        return BedrockAuthError(
            f"{kb}: could not obtain AWS credentials from {chain} ({exc}). Fix: refresh "
            "them (e.g. `aws sso login`) or correct the profile",
            code=type(exc).__name__,
        )
    if isinstance(exc, ReadTimeoutError):
        return BedrockTimeoutError(
            f"{kb}: no answer from {endpoint} within "
            f"{config.timeout_ms} ms (timeout_ms of [knowledge_bases.{name}]). "
            "Fix: raise timeout_ms, or lower number_of_results",
            attempts=attempts,
        )
    if isinstance(exc, ConnectionError | ConnectionClosedError):
        return BedrockConnectionError(
            f"{kb}: cannot reach {endpoint}{tries} ({exc}). Fix: check "
            "`region`"
            + (" and `endpoint_url`" if config.endpoint_url else "")
            + ", the network, proxy settings and VPC endpoints",
            attempts=attempts,
        )
    if isinstance(exc, ParamValidationError):
        return QueryError(f"{kb}: the request is not valid for Bedrock: {exc}")
    return BedrockError(f"{kb}: {type(exc).__name__}: {exc}")


def _credential_chain(name: str, config: BedrockConfig) -> str:
    if config.aws_profile:
        return f"the AWS profile {config.aws_profile!r} (`aws_profile` of [knowledge_bases.{name}])"
    return (
        "the default AWS credential chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(plus AWS_SESSION_TOKEN for temporary keys), else AWS_PROFILE or the default "
        "profile of ~/.aws/config, SSO, or the instance role (or set `aws_profile` in "
        f"[knowledge_bases.{name}])"
    )
