# SPDX-License-Identifier: MIT
"""rdps.RdpsError: a failed C call, with the library's message and errno."""
import errno as _errno


class RdpsError(RuntimeError):
    """A call into librdps failed.

    errno: the positive errno value (e.g. errno.EEXIST) the C call returned
    negated; message: rdps_client_errmsg() or the create call's reason.
    """

    def __init__(self, err, message):
        self.errno = abs(int(err))
        self.message = message
        name = _errno.errorcode.get(self.errno, str(self.errno))
        super().__init__("%s [%s]" % (message, name))
