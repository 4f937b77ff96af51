package dev.ortserve.logging;

import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.impl.ContextInternal;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What the access log says about one request (or one WebSocket {@code response.create}): filled in as the
 * request goes (the model and token counts by the services, the error code by the error writer) and written
 * once when its answer ends. It travels in the request's Vert.x duplicated context ({@link #current()}), which
 * Quarkus REST, Mutiny continuations on the request's context and the services share; code on other threads
 * (the engine's) uses the record it captured on the request's thread. Imports nothing of the app.
 */
public final class AccessRecord {

    private static final String KEY = "ortserve.access-record";

    private final String method;
    private final String path;
    private final String requestId;
    private final long startNanos = System.nanoTime();
    private volatile String model;
    private volatile String errorCode;
    private final AtomicInteger promptTokens = new AtomicInteger(-1);
    private final AtomicInteger completionTokens = new AtomicInteger(-1);
    private final java.util.concurrent.atomic.AtomicLong draftTokens = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong acceptedDraftTokens = new java.util.concurrent.atomic.AtomicLong();
    private final AtomicBoolean written = new AtomicBoolean();

    public AccessRecord(String method, String path, String requestId) {
        this.method = method;
        this.path = path;
        this.requestId = requestId;
    }

    /** The record of the request whose Vert.x context this thread runs on, or null (another thread, or no request). */
    public static AccessRecord current() {
        Context context = Vertx.currentContext();
        if (!(context instanceof ContextInternal internal) || !internal.isDuplicate()) return null;
        return context.getLocal(KEY) instanceof AccessRecord r ? r : null;
    }

    /** Makes this the current record of the Vert.x (duplicated) context this thread runs on; false when there is none. */
    public boolean attach() {
        return attach(Vertx.currentContext());
    }

    /** Makes this the current record of {@code context} when it is a request's (duplicated) context. */
    public boolean attach(Context context) {
        if (!(context instanceof ContextInternal internal) || !internal.isDuplicate()) return false;
        context.putLocal(KEY, this);
        return true;
    }

    public String method() {
        return method;
    }

    public String path() {
        return path;
    }

    public String requestId() {
        return requestId;
    }

    public String model() {
        return model;
    }

    /** The model that served the request (the first one named wins). */
    public void model(String id) {
        if (model == null) model = id;
    }

    /** Prompt tokens, or -1 when the request ran no model. */
    public int promptTokens() {
        return promptTokens.get();
    }

    /** Generated tokens, or -1 when the request ran no model. */
    public int completionTokens() {
        return completionTokens.get();
    }

    public void addPromptTokens(int n) {
        promptTokens.updateAndGet(v -> Math.max(v, 0) + n);
    }

    public void addCompletionTokens(int n) {
        completionTokens.updateAndGet(v -> Math.max(v, 0) + n);
    }

    /** Speculative decoding: draft tokens verified for the request, and those accepted (0 when it drafted none). */
    public void addDraftTokens(long drafted, long accepted) {
        draftTokens.addAndGet(drafted);
        acceptedDraftTokens.addAndGet(accepted);
    }

    public long draftTokens() {
        return draftTokens.get();
    }

    public long acceptedDraftTokens() {
        return acceptedDraftTokens.get();
    }

    /** The error code the request was refused (or its stream stopped) with; the first one wins. */
    public String errorCode() {
        return errorCode;
    }

    public void errorCode(String code) {
        if (errorCode == null && code != null) errorCode = code;
    }

    public long elapsedMillis() {
        return (System.nanoTime() - startNanos) / 1_000_000;
    }

    /** True exactly once: the caller writes the line. */
    public boolean finish() {
        return written.compareAndSet(false, true);
    }
}
