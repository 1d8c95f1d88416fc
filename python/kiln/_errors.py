"""kiln's errors as Python exceptions: one class per kiln status code, all kiln.KilnError."""

import enum


class StatusCode(enum.IntEnum):
    """kiln_status_code (include/kiln/kiln.h)."""

    OK = 0
    INVALID_ARGUMENT = 1
    UNIMPLEMENTED = 2
    NOT_FOUND = 3
    OUT_OF_RANGE = 4
    DATA_LOSS = 5
    FAILED_PRECONDITION = 6
    INTERNAL = 7


class KilnError(RuntimeError):
    """A kiln failure. `code` is its StatusCode, `message` kiln's message (also str(error))."""

    code = StatusCode.INTERNAL

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = StatusCode(code)


# The caller's input is wrong: these are ValueErrors too.
class InvalidArgumentError(KilnError, ValueError):
    code = StatusCode.INVALID_ARGUMENT


class NotFoundError(KilnError, ValueError):
    code = StatusCode.NOT_FOUND


class OutOfRangeError(KilnError, ValueError):
    code = StatusCode.OUT_OF_RANGE


# Valid input kiln does not support yet.
class UnimplementedError(KilnError, NotImplementedError):
    code = StatusCode.UNIMPLEMENTED


class DataLossError(KilnError):
    code = StatusCode.DATA_LOSS


class FailedPreconditionError(KilnError):
    code = StatusCode.FAILED_PRECONDITION


class InternalError(KilnError):
    code = StatusCode.INTERNAL


_BY_CODE = {
    cls.code: cls
    for cls in (InvalidArgumentError, NotFoundError, OutOfRangeError, UnimplementedError,
                DataLossError, FailedPreconditionError, InternalError)
}


def error_from_status(code, message):
    """The exception for a kiln status (called by the extension)."""
    try:
        code = StatusCode(code)
    except ValueError:
        return KilnError(message, StatusCode.INTERNAL)
    return _BY_CODE.get(code, KilnError)(message, code)
