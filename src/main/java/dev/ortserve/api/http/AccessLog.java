package dev.ortserve.api.http;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.logging.AccessRecord;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;

/**
 * Writes the access log: one INFO line per request on the category {@value #CATEGORY}, when its answer
 * has ended (a stream when its last event went out, with its tokens), in the format
 * {@code ortserve.access-log} picks (text, json, off). docs/observability.md shows both formats.
 */
@ApplicationScoped
public class AccessLog {

    public static final String CATEGORY = "dev.ortserve.access";
    private static final Logger LOG = Logger.getLogger(CATEGORY);

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    public boolean enabled() {
        return config.accessLog() != OrtserveConfig.AccessLogFormat.OFF && LOG.isInfoEnabled();
    }

    /** Writes the record's line with this status, unless it was written already. */
    public void write(AccessRecord r, int status) {
        if (r == null || !r.finish() || !enabled()) return;
        LOG.info(config.accessLog() == OrtserveConfig.AccessLogFormat.JSON ? json(r, status) : text(r, status));
    }

    String text(AccessRecord r, int status) {
        StringBuilder b = new StringBuilder(160).append(r.method()).append(' ').append(r.path()).append(' ').append(status)
                .append(' ').append(r.elapsedMillis()).append("ms request_id=").append(r.requestId());
        if (r.model() != null) b.append(" model=").append(r.model());
        if (r.promptTokens() >= 0) b.append(" prompt_tokens=").append(r.promptTokens());
        if (r.completionTokens() >= 0) b.append(" completion_tokens=").append(r.completionTokens());
        if (r.draftTokens() > 0) b.append(" draft_tokens=").append(r.draftTokens()).append(" accepted_draft_tokens=").append(r.acceptedDraftTokens());
        if (r.errorCode() != null) b.append(" error=").append(r.errorCode());
        return b.toString();
    }

    String json(AccessRecord r, int status) {
        ObjectNode o = mapper.createObjectNode().put("method", r.method()).put("path", r.path()).put("status", status)
                .put("duration_ms", r.elapsedMillis()).put("request_id", r.requestId());
        if (r.model() != null) o.put("model", r.model());
        if (r.promptTokens() >= 0) o.put("prompt_tokens", r.promptTokens());
        if (r.completionTokens() >= 0) o.put("completion_tokens", r.completionTokens());
        if (r.draftTokens() > 0) o.put("draft_tokens", r.draftTokens()).put("accepted_draft_tokens", r.acceptedDraftTokens());
        if (r.errorCode() != null) o.put("error", r.errorCode());
        try {
            return mapper.writeValueAsString(o);
        } catch (JsonProcessingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }
}
