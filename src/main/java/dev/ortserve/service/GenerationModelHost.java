package dev.ortserve.service;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.load.ModelFiles;
import dev.ortserve.engine.memory.MemoryBudget;
import dev.ortserve.engine.memory.ProcessMemory;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.service.error.ConflictException;
import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.NotFoundException;
import dev.ortserve.service.error.UnavailableException;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.quarkus.runtime.configuration.MemorySize;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The generative models' lifecycle. The configured models ({@link ModelsFile}, or the one ORTSERVE_MODEL_PATH names, or
 * the demo model and the agent model) each get a {@link ModelSlot}; pinned ones load at startup (one that cannot load
 * stops the server with the loader's message), the others on their first request, one load at a time, on one model
 * thread. A loaded model is one {@link ServedModel} value that requests resolve once ({@link #served(String)}) and carry
 * down. Unpinned models unload after their keep_alive idle, or least recently used first when another must load and
 * ORTSERVE_MODELS_MAX_LOADED or the memory limit would be exceeded; a model a request holds ({@link #using}: from
 * resolving it to its sequences' admission) or with sequences running or waiting never unloads. A model that fails to load leaves the others serving, with its error in /v1/models and the log.
 */
@ApplicationScoped
public class GenerationModelHost {

    private static final Logger LOG = Logger.getLogger(GenerationModelHost.class);
    public static final String DEMO_MODEL_ID = "demo";
    public static final String AGENT_MODEL_ID = "agent";
    /** A model that failed to load is tried again by a request only this long after the failure. */
    static final Duration RETRY_FAILED_AFTER = Duration.ofSeconds(30);

    @Inject
    OrtserveConfig config;

    @Inject
    MeterRegistry registry;

    @Inject
    ServingMetrics metrics;

    /** Wraps the engine's forward passes when a bean provides it (tests inject faults this way); none in production. */
    @Inject
    jakarta.enterprise.inject.Instance<dev.ortserve.engine.DecoderRunner.Decorator> runnerDecorators;

    @Inject
    ModelSources modelSources;

    @Inject
    ConfiguredModels configured;

    private final List<ModelSlot> slots = new ArrayList<>();
    private final Map<String, ModelSlot> byName = new java.util.concurrent.ConcurrentHashMap<>();
    /** The names that are LoRA adapters (their slot is their base model's); runtime loads add to it. */
    private final java.util.Set<String> adapterNames = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** The first pinned model (else the first): what /tokenize without a model and the startup summary use. */
    private ModelSlot first;
    private ServedModelAssembler assembler;
    /** Loads, unloads and the idle check, one at a time. */
    private ScheduledExecutorService modelThread;

    void start(@Observes StartupEvent event) {
        assembler = new ServedModelAssembler(config, runnerDecorators.isResolvable() ? runnerDecorators.get() : runner -> runner);
        assembler.checkSettings();
        KeepAlive keepAlive;
        try {
            keepAlive = KeepAlive.parse(config.keepAlive());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("ORTSERVE_KEEP_ALIVE " + e.getMessage(), e);
        }
        if (config.modelsMaxLoaded() < 1) {
            throw new ModelLoadException("ORTSERVE_MODELS_MAX_LOADED must be at least 1, not " + config.modelsMaxLoaded());
        }
        for (ModelEntry entry : configured.generation()) {
            assembler.checkSettings(entry);
            ModelSlot slot = new ModelSlot(entry, keepAlive);
            slots.add(slot);
            for (String name : entry.names()) byName.put(name, slot);
            for (ModelEntry.Adapter a : entry.adapters()) {
                byName.put(a.id(), slot);
                adapterNames.add(a.id());
            }
        }
        first = slots.stream().filter(s -> s.entry.pinned()).findFirst().orElse(slots.get(0));
        modelThread = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "ortserve-models");
            t.setDaemon(true);
            return t;
        });
        for (ModelSlot slot : slots) {
            if (slot.entry.pinned()) load(slot); // on the startup thread: a pinned model that cannot load stops the start
        }
        modelThread.scheduleWithFixedDelay(this::unloadIdle, 1, 1, TimeUnit.SECONDS);
    }

    /**
     * The model a request names (its id or an alias), loaded: at once when it is, else once its load (started now if
     * none is under way) ends, waiting at most ORTSERVE_MODEL_LOAD_WAIT. 404 model_not_found for a name no model has;
     * 503 model_not_ready (with Retry-After) when the wait runs out; 503 model_load_failed when the load fails.
     * A null name is the first pinned model (/tokenize without a model).
     */
    public Uni<ServedModel> served(String requested) {
        if (requested != null && adapterNames.contains(requested)) {
            // an adapter: its base model, loaded, as the adapter's view (the same engine; its sequences run with the adapter)
            return base(requested).map(s -> {
                if (!s.adapters().containsKey(requested)) throw new ModelNotFoundException(requested); // unloaded meanwhile
                return s.withAdapter(requested);
            });
        }
        return base(requested);
    }

    private Uni<ServedModel> base(String requested) {
        ModelSlot slot = slot(requested);
        slot.touch();
        ServedModel s = slot.served;
        if (s != null) return Uni.createFrom().item(s);
        Uni<ServedModel> loaded = Uni.createFrom().completionStage(() -> startLoad(slot))
                .ifNoItem().after(config.modelLoadWait()).failWith(() -> notReady(slot));
        // the request goes on off the model thread: on its own Vert.x context (its request id in the log lines, the
        // access log's record), as on the fast path; without one (a test calling in directly) on a worker
        io.vertx.core.Context context = io.vertx.core.Vertx.currentContext();
        return context == null ? loaded.emitOn(Infrastructure.getDefaultWorkerPool()) : loaded.emitOn(task -> context.runOnContext(v -> task.run()));
    }

    /**
     * {@link #served(String)} for a request that names a keep_alive (Ollama's: how long the model stays loaded after it,
     * from now on; null: unchanged). A value that is none is a 400 naming {@code keep_alive}, before any model work.
     */
    public Uni<ServedModel> served(String requested, String keepAlive) {
        ModelSlot slot = slot(requested);
        if (keepAlive != null) {
            try {
                slot.keepAlive(KeepAlive.parse(keepAlive));
            } catch (IllegalArgumentException e) {
                throw new dev.ortserve.service.error.InvalidRequestException("keep_alive", "'keep_alive' " + e.getMessage() + ".");
            }
        }
        return served(requested);
    }

    /**
     * The request's work on the model it names, loaded ({@link #served(String, String)}), holding it from the start
     * (through its load) until {@code work}'s answer is ready (its sequences admitted, or the request refused): a model with such a request, or
     * with sequences running or waiting, never unloads. Every protocol goes through here.
     */
    public <T> Uni<T> using(String requested, String keepAlive, java.util.function.Function<ServedModel, Uni<T>> work) {
        ModelSlot slot = slot(requested);
        // held before its load is waited for: between the load's end and the work's start nothing may unload it
        return Uni.createFrom().<T>deferred(() -> {
            slot.leases.incrementAndGet();
            return served(requested, keepAlive).flatMap(work::apply);
        }).onTermination().invoke(() -> release(slot));
    }

    private static void release(ModelSlot slot) {
        slot.leases.decrementAndGet();
        slot.touch(); // keep_alive counts from the end of the last request
    }

    /** {@link #using(String, String, java.util.function.Function)} without a keep_alive. */
    public <T> Uni<T> using(String requested, java.util.function.Function<ServedModel, Uni<T>> work) {
        return using(requested, null, work);
    }

    /** The slot a request's model name resolves to; 404 model_not_found (checked before anything else is done with the request). */
    ModelSlot slot(String requested) {
        if (requested == null) return first;
        ModelSlot slot = byName.get(requested);
        if (slot == null) throw new ModelNotFoundException(requested);
        return slot;
    }

    /** Checks the request's model name before anything else is done with the request (404 model_not_found). */
    public void requireModel(String requested) {
        slot(requested);
    }

    private UnavailableException notReady(ModelSlot slot) {
        long loadingFor = Math.max(0, (System.nanoTime() - slot.loadStartedNanos) / 1_000_000_000L);
        int retryAfter = (int) Math.max(1, Math.min(30, loadingFor / 2 + 1));
        return new UnavailableException("The model '" + slot.id() + "' is still loading; retry after " + retryAfter + " s.", "model_not_ready", retryAfter);
    }

    /** The load requests wait on: the one under way, or a new one queued on the model thread. */
    private CompletableFuture<ServedModel> startLoad(ModelSlot slot) {
        synchronized (slot) {
            ServedModel s = slot.served;
            if (s != null) return CompletableFuture.completedFuture(s);
            if (slot.loading != null) return slot.loading;
            if (slot.state == ModelSlot.State.FAILED && System.nanoTime() - slot.failedAtNanos < RETRY_FAILED_AFTER.toNanos()) {
                return CompletableFuture.failedFuture(loadFailed(slot));
            }
            CompletableFuture<ServedModel> loading = new CompletableFuture<>();
            slot.loading = loading;
            slot.state = ModelSlot.State.LOADING;
            slot.loadStartedNanos = System.nanoTime();
            modelThread.execute(() -> {
                try {
                    loading.complete(load(slot));
                } catch (NoRoomException e) {
                    loading.completeExceptionally(new UnavailableException("The model '" + slot.id() + "' cannot load now: " + e.getMessage()
                            + "; retry after 5 s.", "server_busy", 5));
                } catch (RuntimeException e) {
                    loading.completeExceptionally(loadFailed(slot));
                }
            });
            return loading;
        }
    }

    private static UnavailableException loadFailed(ModelSlot slot) {
        return new UnavailableException("The model '" + slot.id() + "' failed to load; /v1/models and the server's log say why.", "model_load_failed");
    }

    /** No model can unload to make room: every other loaded model is pinned or busy. */
    static final class NoRoomException extends RuntimeException {
        NoRoomException(String message) {
            super(message);
        }
    }

    /**
     * Loads the slot's model (on the model thread, or the startup thread for pinned models): unloads the least recently
     * used idle models first while the count or the memory limit leaves no room, then assembles, instruments and warms it.
     */
    private ServedModel load(ModelSlot slot) {
        long started = System.nanoTime();
        try {
            ModelSources.Located located = locate(slot.entry);
            makeRoom(slot, weightBytes(located.directory(), slot.entry));
            Path draftDir = slot.entry.draftModelPath() == null ? null : slot.entry.draftModelPath().equals("self") ? located.directory()
                    : modelSources.locate(slot.entry.draftModelPath(), Optional.empty(), Optional.empty()).directory();
            String id = slot.id();
            long[] others = reserved(slot);
            ServedModel assembled = assembler.assemble(slot.entry, located.source(), located.directory(), draftDir, others[0], others[1], batching -> {
                batching.listener(metrics.engineListener(id));
                metrics.prefixCache(id, batching::prefixCache);
                metrics.kvBudget(id, batching::kvHeldBytes, batching.kvBudgetBytes(), batching::queueTimeouts);
                metrics.speculativeDecoding(id, batching::draftTokens, batching::acceptedDraftTokens);
            });
            if (slot == first) metrics.memoryBudget(assembled.memory());
            for (ModelEntry.Adapter a : slot.runtimeAdapters) { // loaded again with their model; one that no longer loads is dropped
                try {
                    assembled.adapters().put(a.id(), dev.ortserve.engine.load.LoraAdapters.load(assembled.model(), a.id(), a.path(), config.modelCacheDir()));
                } catch (ModelLoadException e) {
                    LOG.warnf("LoRA adapter '%s' (loaded at runtime) of '%s' no longer loads and is dropped: %s", a.id(), id, e.getMessage());
                    slot.runtimeAdapters.remove(a);
                    adapterNames.remove(a.id());
                    byName.remove(a.id());
                }
            }
            GenerationEngine engine = assembled.engine();
            metrics.keep(id, Gauge.builder("ortserve_requests_running", engine, GenerationEngine::runningSequences)
                    .description("Sequences being prefilled or decoded").tag("model", id).register(registry));
            metrics.keep(id, Gauge.builder("ortserve_requests_waiting", engine, GenerationEngine::waitingSequences)
                    .description("Sequences waiting in the admission queue").tag("model", id).register(registry));
            warmUp(engine, assembled.model());
            synchronized (slot) {
                slot.served = assembled;
                slot.state = ModelSlot.State.LOADED;
                slot.error = null;
                slot.loading = null;
                slot.touch();
            }
            LOG.infof("Serving model '%s' from %s (loaded in %d ms)", id, located.directory(), (System.nanoTime() - started) / 1_000_000);
            return assembled;
        } catch (NoRoomException e) {
            synchronized (slot) {
                slot.state = ModelSlot.State.UNLOADED;
                slot.loading = null;
            }
            LOG.warnf("Model '%s' not loaded: %s", slot.id(), e.getMessage());
            throw e;
        } catch (RuntimeException e) {
            metrics.forget(slot.id());
            synchronized (slot) {
                slot.state = ModelSlot.State.FAILED;
                slot.error = e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
                slot.failedAtNanos = System.nanoTime();
                slot.loading = null;
            }
            if (slot.entry.pinned()) throw e;
            LOG.errorf(e, "Model '%s' failed to load; the other models serve on", slot.id());
            throw e;
        }
    }

    private ModelSources.Located locate(ModelEntry entry) {
        if (entry.path().startsWith(ModelEntry.GENERATED)) {
            String name = entry.path().substring(ModelEntry.GENERATED.length());
            ModelSize size;
            try {
                size = ModelSize.valueOf(name.toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new ModelLoadException("Model '" + entry.id() + "': no generated model '" + name + "' (demo, agent, tiny, bench)", e);
            }
            try {
                Path dir = ModelGenerator.ensure(size, config.modelCacheDir());
                return new ModelSources.Located(dir, dir.toString(), entry.id());
            } catch (IOException e) {
                throw new UncheckedIOException("Cannot build the " + name + " model in " + config.modelCacheDir(), e);
            }
        }
        return modelSources.locate(entry.path(), Optional.ofNullable(entry.revision()), Optional.ofNullable(entry.file()));
    }

    /** The served file's bytes (with its external data): what loading it adds to the resident set, at most. */
    private static long weightBytes(Path dir, ModelEntry entry) {
        try {
            List<String> files = ModelFiles.list(dir);
            String onnx = ModelFiles.chooseOnnx(files, Optional.ofNullable(entry.file()), dir.toString());
            long bytes = Files.size(dir.resolve(onnx));
            for (String data : ModelFiles.externalData(files, onnx)) bytes += Files.size(dir.resolve(data));
            return bytes;
        } catch (IOException | RuntimeException e) {
            return 0; // the loader names what is wrong
        }
    }

    /** The other loaded models' KV budgets and working memory, set aside from a new model's budget. */
    private long[] reserved(ModelSlot except) {
        long kv = 0;
        long working = 0;
        for (ModelSlot s : slots) {
            ServedModel served = s.served;
            if (s == except || served == null) continue;
            kv += served.memory().kv();
            working += served.memory().working();
        }
        return new long[] {kv, working};
    }

    /**
     * Unloads idle unpinned models, least recently used first, until the count and the memory limit leave room for
     * {@code weights}; while none can unload yet (pinned, or held by requests), waits for one as long as a request
     * waits for a load (ORTSERVE_MODEL_LOAD_WAIT).
     */
    private void makeRoom(ModelSlot loading, long weights) {
        long deadline = System.nanoTime() + config.modelLoadWait().toNanos();
        while (true) {
            long loaded = slots.stream().filter(s -> s != loading && s.served != null).count();
            long[] others = reserved(loading);
            long headroom = MemoryBudget.headroom(new ProcessMemory(), config.memoryLimit().map(MemorySize::asLongValue).orElse(0L), others[0] + others[1]);
            boolean tooMany = loaded >= config.modelsMaxLoaded();
            boolean tooBig = loaded > 0 && weights > headroom;
            if (!tooMany && !tooBig) return;
            List<ModelSlot> unpinned = slots.stream().filter(s -> s != loading && s.served != null && !s.entry.pinned()).toList();
            // only pinned models beside it: the file size was an estimate; the load's measured memory split decides
            if (unpinned.isEmpty() && !tooMany) return;
            ModelSlot victim = unpinned.stream().filter(s -> s.busy() == 0).min(Comparator.comparingLong(s -> s.lastUsedNanos)).orElse(null);
            if (victim == null && System.nanoTime() < deadline) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new NoRoomException("the server is stopping");
                }
                continue;
            }
            if (victim == null) {
                throw new NoRoomException(tooMany ? loaded + " models are loaded (ORTSERVE_MODELS_MAX_LOADED=" + config.modelsMaxLoaded()
                        + ") and none can unload (pinned or in use)"
                        : "the memory limit leaves " + (Math.max(0, headroom) >> 20) + " MiB for its " + (weights >> 20)
                        + " MiB of weights and no loaded model can unload (pinned or in use)");
            }
            LOG.infof("Unloading model '%s' (least recently used) to make room for '%s'", victim.id(), loading.id());
            unload(victim);
        }
    }

    /** Every unpinned model idle past its keep_alive unloads (the model thread, each second). */
    private void unloadIdle() {
        try {
            long now = System.nanoTime();
            for (ModelSlot slot : slots) {
                if (slot.served == null) continue;
                if (slot.busy() > 0) {
                    slot.touch(); // keep_alive counts from the end of the last request
                    continue;
                }
                if (slot.keepAlive.forever()) continue;
                long idle = now - slot.lastUsedNanos;
                if (idle >= slot.keepAlive.duration().toNanos()) {
                    LOG.infof("Unloading model '%s': idle for its keep_alive (%s)", slot.id(), slot.keepAlive);
                    unload(slot);
                }
            }
        } catch (RuntimeException e) {
            LOG.error("The idle-model check failed", e);
        }
    }

    /** Closes a loaded model's engine and sessions and forgets its gauges. */
    private void unload(ModelSlot slot) {
        ServedModel s;
        synchronized (slot) {
            s = slot.served;
            slot.served = null;
            slot.state = ModelSlot.State.UNLOADED;
        }
        if (s == null) return;
        metrics.forget(slot.id());
        s.engine().close();
        s.closeAdapters();
        s.model().close();
    }

    /**
     * POST /models/load: loads the model now (waits for it, as a request does). An unknown name is 404.
     */
    public Uni<ServedModel> load(String requested) {
        return served(requested);
    }

    /**
     * POST /models/unload: unloads it now (an unloaded model stays unloaded). 409 model_pinned for a pinned model,
     * 409 model_busy for one with sequences running or waiting.
     */
    public Uni<String> unload(String requested) {
        ModelSlot slot = slot(requested);
        if (adapterNames.contains(requested)) {
            throw new dev.ortserve.service.error.InvalidRequestException("model", "'" + requested + "' is a LoRA adapter of the model '" + slot.id()
                    + "': it is loaded and unloaded with its model.");
        }
        return Uni.createFrom().completionStage(() -> CompletableFuture.supplyAsync(() -> {
            if (slot.entry.pinned()) {
                throw new ConflictException("The model '" + slot.id() + "' is pinned: it is never unloaded.", "model", "model_pinned");
            }
            int busy = slot.busy();
            if (busy > 0) {
                throw new ConflictException("The model '" + slot.id() + "' has " + busy + " requests running or waiting; unload it when they end.",
                        "model", "model_busy");
            }
            unload(slot);
            LOG.infof("Unloaded model '%s' (POST /models/unload)", slot.id());
            return slot.id();
        }, modelThread));
    }

    /**
     * POST /v1/load_lora_adapter (vLLM's): loads the adapter at {@code path} under {@code name} on {@code base} (the first
     * pinned model when null), loading the model first if it is not; answers its model's id. 404 when runtime updating is
     * off or the model is unknown; 409 for a name a model or adapter has; 400 for an adapter that does not fit (the
     * loader's message: the path is the client's own).
     */
    public Uni<String> loadAdapter(String name, String path, String base) {
        runtimeUpdating();
        if (byName.containsKey(name)) {
            throw new ConflictException("The name '" + name + "' is a model's or an adapter's already.", "lora_name", "name_taken");
        }
        ModelSlot slot = slot(base);
        if (base != null && adapterNames.contains(base)) {
            throw new dev.ortserve.service.error.InvalidRequestException("base_model", "'" + base + "' is a LoRA adapter; name the model it runs on.");
        }
        return base(slot.id()).flatMap(served -> Uni.createFrom().completionStage(() -> CompletableFuture.supplyAsync(() -> {
            if (slot.served != served) {
                throw new UnavailableException("The model '" + slot.id() + "' was unloaded as the adapter loaded; retry.", "model_not_ready", 1);
            }
            if (byName.containsKey(name)) {
                throw new ConflictException("The name '" + name + "' is a model's or an adapter's already.", "lora_name", "name_taken");
            }
            dev.ortserve.engine.LoraAdapter adapter;
            try {
                adapter = dev.ortserve.engine.load.LoraAdapters.load(served.model(), name, Path.of(path), config.modelCacheDir());
            } catch (ModelLoadException | java.nio.file.InvalidPathException e) {
                throw new dev.ortserve.service.error.InvalidRequestException("lora_path", e.getMessage(), "invalid_lora_adapter");
            }
            served.adapters().put(name, adapter);
            slot.runtimeAdapters.add(new ModelEntry.Adapter(name, Path.of(path)));
            adapterNames.add(name);
            byName.put(name, slot);
            LOG.infof("Loaded LoRA adapter '%s' on '%s' (POST /v1/load_lora_adapter)", name, slot.id());
            return slot.id();
        }, modelThread)));
    }

    /**
     * POST /v1/unload_lora_adapter (vLLM's): the name is gone at once (requests naming it get 404); requests already
     * admitted with it finish with it, and its memory is freed when its model unloads. 404 when runtime updating is off
     * or no adapter has the name; 409 for an adapter the configuration lists (it would come back with its model).
     */
    public Uni<String> unloadAdapter(String name) {
        runtimeUpdating();
        if (!adapterNames.contains(name)) throw new NotFoundException("No LoRA adapter is named '" + name + "'.", "lora_name", "model_not_found");
        ModelSlot slot = byName.get(name);
        if (slot.entry.adapters().stream().anyMatch(a -> a.id().equals(name))) {
            throw new ConflictException("The adapter '" + name + "' is configured (models file or ORTSERVE_LORA_MODULES); only adapters loaded at"
                    + " runtime unload.", "lora_name", "adapter_configured");
        }
        return Uni.createFrom().completionStage(() -> CompletableFuture.supplyAsync(() -> {
            adapterNames.remove(name);
            byName.remove(name);
            slot.runtimeAdapters.removeIf(a -> a.id().equals(name));
            ServedModel s = slot.served;
            if (s != null) {
                dev.ortserve.engine.LoraAdapter a = s.adapters().remove(name);
                if (a != null) s.unloaded().add(a);
            }
            LOG.infof("Unloaded LoRA adapter '%s' of '%s' (POST /v1/unload_lora_adapter)", name, slot.id());
            return slot.id();
        }, modelThread));
    }

    private void runtimeUpdating() {
        if (!config.allowRuntimeLoraUpdating()) {
            throw new NotFoundException("Runtime LoRA adapter loading is off on this server (ORTSERVE_ALLOW_RUNTIME_LORA_UPDATING).", null, "not_found");
        }
    }

    /** A configured model's state now: loaded, loading, unloaded or failed, and its last load's error. */
    public ServedModelInfo info(String requested) {
        ModelSlot slot = slot(requested);
        return info().stream().filter(m -> m.id().equals(slot.id())).findFirst().orElseThrow();
    }

    private static void warmUp(GenerationEngine engine, LoadedModel model) {
        int[] prompt = model.tokenizer().encode("warm up");
        if (prompt.length == 0) prompt = new int[] {0};
        engine.generate(new dev.ortserve.engine.GenerationRequest("warmup", prompt, SamplingParams.greedy(1)))
                .collect().last().await().atMost(Duration.ofMinutes(5));
    }

    void stop(@Observes ShutdownEvent event) {
        if (modelThread != null) modelThread.shutdownNow();
        for (ModelSlot slot : slots) {
            ServedModel s = slot.served;
            if (s == null) continue;
            s.engine().close();
            if (!jvmExiting()) s.closeAdapters();
            // When the JVM itself is exiting, ONNX Runtime's own shutdown hook releases the native
            // environment concurrently: releasing the session as well could race it. The process is
            // ending; its memory goes with it. (Tests restart the application in one JVM: close there.)
            if (!jvmExiting()) s.model().close();
        }
    }

    static boolean jvmExiting() {
        Thread probe = new Thread(() -> { });
        try {
            Runtime.getRuntime().addShutdownHook(probe);
            Runtime.getRuntime().removeShutdownHook(probe);
            return false;
        } catch (IllegalStateException shuttingDown) {
            return true;
        }
    }

    /** Ready when every pinned model is loaded. */
    public boolean ready() {
        return first != null && slots.stream().allMatch(s -> !s.entry.pinned() || s.served != null);
    }

    /** Sequences running or waiting on every loaded model (the shutdown drain waits for 0). */
    public int busy() {
        return slots.stream().mapToInt(ModelSlot::busy).sum();
    }

    /** The first pinned model's id (the default for /tokenize, the readiness data, the startup summary). */
    public String modelId() {
        return first == null ? null : first.id();
    }

    /** The first pinned model, loaded (null before the start). */
    public ServedModel defaultModel() {
        return first == null ? null : first.served;
    }

    /** The first pinned model's engine (tests and benchmarks drive it directly). */
    public GenerationEngine engine() {
        return defaultModel().engine();
    }

    /** The first pinned model's loaded model (tests and benchmarks). */
    public LoadedModel model() {
        return defaultModel().model();
    }

    /** The model's token ids of {@code text}, without special tokens (tests). */
    public int[] encode(String text) {
        return model().tokenizer().encode(text, false);
    }

    /** Every configured model, loaded or not, for /v1/models. */
    public List<ServedModelInfo> info() {
        List<ServedModelInfo> infos = new ArrayList<>();
        for (ModelSlot slot : slots) {
            ServedModel s = slot.served;
            ModelSlot.State state = slot.state;
            infos.add(new ServedModelInfo(slot.id(), ServedModelInfo.Kind.GENERATION,
                    s != null ? s.model().spec().maxModelLen() : 0,
                    s != null ? s.model().directory().toString() : null, s != null ? s.createdAt() : 0,
                    s == null ? null : s.parsers().toolsName(), s == null ? null : s.parsers().reasoningName(),
                    slot.entry.aliases(), state.name().toLowerCase(Locale.ROOT), state == ModelSlot.State.FAILED ? slot.error : null,
                    slot.entry.pinned(), null, s == null ? null : ServedModelInfo.modalities(s.takesImages())));
            for (ModelEntry.Adapter a : slot.adapters()) {
                infos.add(new ServedModelInfo(a.id(), ServedModelInfo.Kind.GENERATION, s != null ? s.model().spec().maxModelLen() : 0, a.path().toString(),
                        s != null ? s.createdAt() : 0, s == null ? null : s.parsers().toolsName(), s == null ? null : s.parsers().reasoningName(),
                        List.of(), state.name().toLowerCase(Locale.ROOT), state == ModelSlot.State.FAILED ? slot.error : null, slot.entry.pinned(),
                        slot.id(), s == null ? null : ServedModelInfo.modalities(s.takesImages())));
            }
        }
        return infos;
    }
}
