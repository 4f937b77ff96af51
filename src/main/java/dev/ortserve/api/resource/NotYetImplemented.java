package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;

/** The answer of contract operations whose implementation has not landed yet: honest, never a stub success. */
final class NotYetImplemented {

    private NotYetImplemented() {
    }

    static ApiException of(String what) {
        return new ApiException(501, "invalid_request_error", what + " is not implemented by this build of ortserve yet.", null, "not_implemented");
    }
}
