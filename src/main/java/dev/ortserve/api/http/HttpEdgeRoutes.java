package dev.ortserve.api.http;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.logging.AccessRecord;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpHeaders;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;
import org.jboss.logging.MDC;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.List;
import java.util.UUID;
import java.util.regex.Pattern;

/**
 * What happens to every request before JAX-RS sees it: the request id, the API key check and
 * the body-size limit. They run as Vert.x routes so that a refused request is answered before
 * its body is read.
 */
@ApplicationScoped
public class HttpEdgeRoutes {

    private static final Logger LOG = Logger.getLogger(HttpEdgeRoutes.class);
    public static final String REQUEST_ID_HEADER = "x-request-id";
    public static final String REQUEST_ID_KEY = "requestId";
    /** The request's {@link AccessRecord} in the routing context. */
    public static final String ACCESS_KEY = "ortserve.access";
    private static final Pattern SAFE_REQUEST_ID = Pattern.compile("[A-Za-z0-9._:\\-]{1,128}");

    @Inject
    OrtserveConfig config;

    @Inject
    ErrorEnvelope errors;

    @Inject
    dev.ortserve.service.ShutdownDrain drain;

    @Inject
    AccessLog accessLog;

    private List<byte[]> keyDigests = List.of();
    private byte[] adminKeyDigest;

    void install(@Observes Router router) {
        SseWriter.stallTimeout(config.streamStallTimeout());
        keyDigests = config.apiKeys().orElse(List.of()).stream()
                .map(String::trim).filter(k -> !k.isEmpty()).map(HttpEdgeRoutes::sha256).toList();
        if (keyDigests.isEmpty()) {
            LOG.info("No API keys configured: the API is open");
        } else {
            LOG.infof("API key authentication on: %d key(s) configured", keyDigests.size());
        }
        adminKeyDigest = config.adminKey().map(String::trim).filter(k -> !k.isEmpty()).map(HttpEdgeRoutes::sha256).orElse(null);
        router.route().order(-1_000).handler(this::edge);
    }

    private void edge(RoutingContext ctx) {
        String requestId = ctx.request().getHeader(REQUEST_ID_HEADER);
        if (requestId == null || !SAFE_REQUEST_ID.matcher(requestId).matches()) {
            requestId = UUID.randomUUID().toString();
        }
        ctx.put(REQUEST_ID_KEY, requestId);
        ctx.response().putHeader(REQUEST_ID_HEADER, requestId);
        MDC.put(REQUEST_ID_KEY, requestId);

        String path = ctx.normalizedPath();
        if (accessLog.enabled() && !quietPath(path)) {
            AccessRecord access = new AccessRecord(ctx.request().method().name(), path, requestId);
            access.attach();
            ctx.put(ACCESS_KEY, access);
            ctx.addEndHandler(done -> {
                if (done.failed()) access.errorCode("connection_closed"); // the client went away before the answer ended
                accessLog.write(access, ctx.response().getStatusCode());
            });
        }
        if (isAdminPath(path) && !adminAuthorized(ctx)) return;
        if (isApiPath(path) && drain.draining()) {
            reply(ctx, ApiException.unavailable("The server is shutting down; retry on another replica.", "shutting_down"));
            return;
        }
        if (isApiPath(path) && !keyDigests.isEmpty() && !authorized(presentedKey(ctx.request()))) {
            reply(ctx, new ApiException(401, "invalid_request_error",
                    "Incorrect or missing API key. Provide it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.", null, "invalid_api_key"));
            return;
        }
        String length = ctx.request().getHeader(HttpHeaders.CONTENT_LENGTH);
        if (length != null) {
            long declared;
            try {
                declared = Long.parseLong(length.trim());
            } catch (NumberFormatException e) {
                declared = -1;
            }
            if (declared > config.maxBodySize().asLongValue()) {
                reply(ctx, bodyTooLarge());
                return;
            }
        } else if (isApiPath(path) && ctx.request().version() != io.vertx.core.http.HttpVersion.HTTP_2
                && ctx.request().headers().contains(HttpHeaders.TRANSFER_ENCODING)) {
            readChunkedBody(ctx);
            return;
        }
        ctx.next();
    }

    /**
     * A chunked HTTP/1.1 body declares no length: count its bytes as they come and answer 413 with the
     * error envelope the moment it passes the limit (Quarkus REST would otherwise answer an empty
     * 413 itself). A body within the limit is handed on as read, which Quarkus REST uses as is.
     * (Not for HTTP/2, whose requests Quarkus REST cannot take once they have been read to the end;
     * an HTTP/2 body over the limit without content-length still gets Quarkus's empty 413.)
     */
    private void readChunkedBody(RoutingContext ctx) {
        long limit = config.maxBodySize().asLongValue();
        Buffer body = Buffer.buffer();
        boolean[] refused = {false};
        ctx.request().handler(chunk -> {
            if (refused[0]) return; // the answer is out; the rest is discarded until the connection closes
            if (body.length() + (long) chunk.length() > limit) {
                refused[0] = true;
                reply(ctx, bodyTooLarge());
                return;
            }
            body.appendBuffer(chunk);
        });
        ctx.request().endHandler(done -> {
            if (refused[0]) return;
            ctx.setBody(body);
            ctx.next();
        });
        // curl and others wait for "100 Continue" before sending a large body (Quarkus REST would send it when it starts reading)
        if ("100-continue".equalsIgnoreCase(ctx.request().getHeader(HttpHeaders.EXPECT))) ctx.response().writeContinue();
    }

    public ApiException bodyTooLarge() {
        return new ApiException(413, "invalid_request_error",
                "Request body exceeds the limit of " + config.maxBodySize().asLongValue() + " bytes.", null, "request_too_large");
    }

    private void reply(RoutingContext ctx, ApiException e) {
        // The body is never read: close the connection after answering so unread bytes do not linger.
        ctx.response().putHeader(HttpHeaders.CONNECTION, "close");
        errors.write(ctx.response(), e, ctx.normalizedPath());
    }

    /** Probes and metric scrapes come every few seconds and would drown the access log. */
    static boolean quietPath(String path) {
        return path.startsWith("/q/health") || path.equals("/q/metrics");
    }

    /** The model admin endpoints (llama.cpp router's names): behind ORTSERVE_ADMIN_KEY, not the API keys. */
    static boolean isAdminPath(String path) {
        return path.equals("/models/load") || path.equals("/models/unload") || path.equals("/v1/load_lora_adapter") || path.equals("/v1/unload_lora_adapter");
    }

    /** Off (404) without an admin key; 401 unless the request presents it. Answers the request itself when it is refused. */
    private boolean adminAuthorized(RoutingContext ctx) {
        if (adminKeyDigest == null) {
            reply(ctx, ApiException.notFound("The model admin endpoints are off on this server (no admin key is configured).", null, "not_found"));
            return false;
        }
        String presented = presentedKey(ctx.request());
        if (presented == null || !MessageDigest.isEqual(sha256(presented), adminKeyDigest)) {
            reply(ctx, new ApiException(401, "invalid_request_error",
                    "Incorrect or missing admin key. Provide it as 'Authorization: Bearer <key>'.", null, "invalid_api_key"));
            return false;
        }
        return true;
    }

    static boolean isApiPath(String path) {
        return path.startsWith("/v1/") || path.equals("/v1") || path.equals("/tokenize") || path.equals("/detokenize");
    }

    /**
     * Who owns what this request stores: a digest of its API key (never the key itself), or ""
     * on an open server. Responses stored under one key are invisible to every other key.
     */
    public String ownerOf(io.vertx.core.http.HttpServerRequest request) {
        if (keyDigests.isEmpty()) return "";
        String key = presentedKey(request);
        if (key == null) return "";
        return java.util.HexFormat.of().formatHex(sha256("ortserve-owner:" + key), 0, 16);
    }

    /**
     * The API key the request presents: {@code Authorization: Bearer <key>}, or Anthropic's
     * {@code x-api-key: <key>} (the same keys); null when it presents none.
     */
    static String presentedKey(io.vertx.core.http.HttpServerRequest request) {
        String header = request.getHeader(HttpHeaders.AUTHORIZATION);
        if (header != null && header.regionMatches(true, 0, "Bearer ", 0, 7)) return header.substring(7).trim();
        String apiKey = request.getHeader("x-api-key");
        return apiKey == null || apiKey.isBlank() ? null : apiKey.trim();
    }

    private boolean authorized(String presentedKey) {
        if (presentedKey == null) {
            return false;
        }
        byte[] presented = sha256(presentedKey);
        boolean match = false;
        for (byte[] key : keyDigests) {
            // Compare digests in constant time and look at every key, so timing tells nothing.
            match |= MessageDigest.isEqual(presented, key);
        }
        return match;
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
