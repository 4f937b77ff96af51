package dev.ortserve.service.responses;

import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnavailableException;
import dev.ortserve.store.ConversationFullException;
import dev.ortserve.store.RecordTooLargeException;
import dev.ortserve.store.StoreUnavailableException;
import org.jboss.logging.Logger;

/** The conversation store's failures in the services' terms: what a client may read, never hosts or ports. */
public final class StoreFailures {

    private static final Logger LOG = Logger.getLogger(StoreFailures.class);

    private StoreFailures() {
    }

    public static Throwable of(Throwable f) {
        if (f instanceof StoreUnavailableException u) {
            // the store's own words (hosts, ports) go to the log, not to clients
            LOG.warnf("Conversation store unavailable: %s", u.getMessage());
            return new UnavailableException("The conversation store is unavailable. Retry shortly, or send 'store': false.", "store_unavailable");
        }
        if (f instanceof RecordTooLargeException r) {
            return new InvalidRequestException("store", "The response cannot be stored: " + r.getMessage()
                    + " (ORTSERVE_STORE_MAX_RECORD_BYTES). Lower 'max_output_tokens' or send 'store': false.", "response_too_large");
        }
        if (f instanceof ConversationFullException c) {
            return new InvalidRequestException("previous_response_id", "The conversation cannot grow further: " + c.getMessage()
                    + " (ORTSERVE_STORE_MAX_CONVERSATION_BYTES). Start a new conversation.", "conversation_too_large");
        }
        return f;
    }
}
