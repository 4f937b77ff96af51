package dev.ortserve.service;

import dev.ortserve.engine.DraftCheck;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.LoraAdapter;
import dev.ortserve.engine.load.LoraAdapters;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.memory.MemoryBudget;
import dev.ortserve.engine.memory.ProcessMemory;
import dev.ortserve.engine.rewrite.KvCacheDtype;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.speculative.SpeculativeOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.parse.ParserSelection;
import dev.ortserve.parse.Parsers;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.quarkus.runtime.configuration.MemorySize;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.Optional;
import dev.ortserve.service.structured.StructuredOutputs;

/**
 * Builds what is served from the configuration, once, at startup: the engine options, the loaded
 * model, its chat template and prompts (probed), the parsers chosen for it and its engine. Every
 * configuration mistake stops here with the setting named; a half-built model is closed before the
 * failure leaves. {@link GenerationModelHost} owns the lifecycle around it (source, metrics, warm-up,
 * shutdown).
 */
final class ServedModelAssembler {

    private static final Logger LOG = Logger.getLogger(ServedModelAssembler.class);

    private final OrtserveConfig config;
    private final DecoderRunner.Decorator runnerDecorator;

    ServedModelAssembler(OrtserveConfig config, DecoderRunner.Decorator runnerDecorator) {
        this.config = config;
        this.runnerDecorator = runnerDecorator;
    }

    /** Parser names are checked before anything is loaded, with the valid names listed. */
    void checkSettings() {
        config.toolCallParser().filter(n -> !n.equals(ParserSelection.NONE)).ifPresent(Parsers::toolCalls);
        config.reasoningParser().filter(n -> !n.equals(ParserSelection.NONE)).ifPresent(Parsers::reasoning);
    }

    /** A model's own parser names and precision, checked at start with the model named, before anything is loaded. */
    void checkSettings(ModelEntry entry) {
        try {
            Optional.ofNullable(entry.toolCallParser()).filter(n -> !n.equals(ParserSelection.NONE)).ifPresent(Parsers::toolCalls);
            Optional.ofNullable(entry.reasoningParser()).filter(n -> !n.equals(ParserSelection.NONE)).ifPresent(Parsers::reasoning);
            if (entry.weightPrecision() != null) WeightPrecision.parse(entry.weightPrecision());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("Model '" + entry.id() + "': " + e.getMessage(), e);
        }
    }

    /**
     * @param draftDir   the draft model's directory (speculative decoding), or null for none
     * @param instrument attaches the metrics to the new engine before it serves anything
     */
    ServedModel assemble(ModelEntry entry, String source, Path dir, Path draftDir, long otherKv, long otherWorking,
                         java.util.function.Consumer<ContinuousBatchingEngine> instrument) {
        EngineOptions configured = engineOptions(entry);
        Optional<String> file = Optional.ofNullable(entry.file());
        LoadedModel model = ModelLoader.load(dir, configured, file);
        LoadedModel draft = null;
        java.util.Map<String, LoraAdapter> adapters = new java.util.LinkedHashMap<>();
        try {
            // loaded before the budget is split: its weights are part of the resident set measured at ready
            draft = draftDir == null ? null : loadDraft(draftDir, dir, configured, model, file);
            // so are the adapters' tensors
            for (ModelEntry.Adapter a : entry.adapters()) adapters.put(a.id(), LoraAdapters.load(model, a.id(), a.path(), config.modelCacheDir()));
            MemoryBudget budget = memoryBudget(entry.id(), model, configured, otherKv, otherWorking);
            EngineOptions options = configured.withKvCacheBytes(budget.kv());
            VisionInput vision = VisionInput.of(model, config.images()); // a vision export whose processor is unknown fails here, before its engine
            String template = chatTemplate(model, entry);
            ChatPromptRenderer chatPrompts = new ChatPromptRenderer(model, template, Clock.systemUTC(),
                    new dev.ortserve.jinja.Template.Limits(config.chatTemplateTimeout(), config.chatTemplateMaxChars()));
            chatPrompts.probe();
            ParserSelection parsers = ParserSelection.choose(Optional.ofNullable(entry.toolCallParser()).or(config::toolCallParser),
                    Optional.ofNullable(entry.reasoningParser()).or(config::reasoningParser),
                    new ParserSelection.ModelHints(template, model.tokenizer().addedTokens(), chatPrompts.generationPrompt()));
            if (parsers.tools() != null) chatPrompts.callIds(parsers.tools()::templateCallId);
            LOG.infof("Model '%s' parsers: %s", entry.id(), parsers.describe());
            ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options, runnerDecorator, draft);
            draft = null; // the engine's now
            if (!adapters.isEmpty() && !engine.runsAdapters()) {
                engine.close();
                throw new ModelLoadException("Model '" + entry.id() + "': LoRA adapters need its KV written in place (a GroupQueryAttention graph:"
                        + " ORTSERVE_ENGINE_FUSE_ATTENTION and ORTSERVE_ENGINE_KV_IN_PLACE on), which this model's graph does not allow");
            }
            instrument.accept(engine);
            if (!adapters.isEmpty()) LOG.infof("Model '%s' adapters: %s", entry.id(), String.join(", ", adapters.keySet()));
            return new ServedModel(entry.id(), source, model, engine, chatPrompts, parsers, Instant.now().getEpochSecond(), budget,
                    new StructuredOutputs(model), new java.util.concurrent.ConcurrentHashMap<>(adapters), new java.util.concurrent.CopyOnWriteArrayList<>(),
                    null, null, vision);
        } catch (RuntimeException e) {
            if (draft != null) draft.close();
            adapters.values().forEach(LoraAdapter::close);
            model.close();
            throw e;
        }
    }

    /**
     * The draft model (ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH) at its precision, with the served model's rewrites otherwise;
     * a tokenizer that differs from the served model's stops the start with both named.
     */
    private LoadedModel loadDraft(Path draftDir, Path dir, EngineOptions configured, LoadedModel model, Optional<String> file) {
        WeightPrecision precision;
        try {
            precision = WeightPrecision.parse(config.speculative().draftWeightPrecision());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("ORTSERVE_SPECULATIVE_DRAFT_WEIGHT_PRECISION: " + e.getMessage(), e);
        }
        if (draftDir.equals(dir) && precision == configured.rewrite().precision()) {
            throw new ModelLoadException("ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH: the draft is the served model itself at the same precision ("
                    + precision.name().toLowerCase() + "): it would cost a pass per token and save none (set ORTSERVE_SPECULATIVE_DRAFT_WEIGHT_PRECISION"
                    + " lower, e.g. int4)");
        }
        LoadedModel draft = ModelLoader.load(draftDir, configured.withRewrite(configured.rewrite().withPrecision(precision), configured.rewriteCache()),
                draftDir.equals(dir) ? file : java.util.Optional.empty());
        String mismatch = DraftCheck.check(model, draft);
        if (mismatch != null) {
            draft.close();
            throw new ModelLoadException("ORTSERVE_SPECULATIVE_DRAFT_MODEL_PATH: " + mismatch);
        }
        LOG.infof("Draft model: %s at %s (%s)", draftDir, precision.name().toLowerCase(), String.join(", ", draft.rewrites()));
        return draft;
    }

    /**
     * The process's memory split once the model is loaded (its resident set measured): the KV budget is what the
     * limit leaves, or the configured one within it; a limit that cannot hold the model stops the start here.
     */
    private MemoryBudget memoryBudget(String id, LoadedModel model, EngineOptions options, long otherKv, long otherWorking) {
        long perToken = model.spec().kvBytesPerToken();
        int context = model.spec().maxModelLen();
        MemoryBudget.Request request = new MemoryBudget.Request(config.memoryLimit().map(MemorySize::asLongValue).orElse(0L),
                options.kvCacheBytes(), perToken * options.maxSequences() * (long) context, perToken * Math.min(context, MIN_KV_TOKENS),
                options.working(model.spec(), model.lastPositionLogits())).besides(otherKv, otherWorking);
        MemoryBudget budget;
        try {
            budget = MemoryBudget.split(new ProcessMemory(), request);
        } catch (MemoryBudget.DoesNotFitException e) {
            throw new ModelLoadException(e.getMessage() + " (ORTSERVE_MEMORY_LIMIT, ORTSERVE_ENGINE_KV_CACHE_BYTES" + (otherKv > 0
                    ? "; other models are loaded: ORTSERVE_MODELS_MAX_LOADED" : "") + ")", e);
        }
        budget.warnings().forEach(w -> LOG.warnf("Memory budget of '%s': %s", id, w));
        String malloc = budget.mallocWarning(new ProcessMemory(), System.getenv());
        if (malloc != null) LOG.warnf("Memory budget of '%s': %s", id, malloc);
        LOG.infof("Memory budget of '%s': %s", id, budget.describe());
        return budget;
    }

    /** The least KV a start accepts: this many tokens of one sequence (or its whole context when shorter). */
    static final int MIN_KV_TOKENS = 1024;

    private EngineOptions engineOptions(ModelEntry entry) {
        WeightPrecision precision;
        try {
            precision = WeightPrecision.parse(entry.weightPrecision() != null ? entry.weightPrecision() : config.engine().weightPrecision());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("ORTSERVE_ENGINE_WEIGHT_PRECISION: " + e.getMessage(), e);
        }
        KvCacheDtype kvDtype;
        try {
            kvDtype = KvCacheDtype.parse(config.engine().kvCacheDtype());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("ORTSERVE_ENGINE_KV_CACHE_DTYPE: " + e.getMessage(), e);
        }
        return EngineOptions.builder()
                .executionProvider(config.executionProvider().name()).cudaDeviceId(config.cudaDeviceId())
                .intraOpThreads(config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors()))
                .maxSequences(config.engine().maxSequences()).queueCapacity(config.engine().queueCapacity())
                .prefillChunkTokens(config.engine().prefillChunkTokens())
                .maxModelLen(entry.maxModelLen() != null ? java.util.OptionalInt.of(entry.maxModelLen()) : config.engine().maxModelLen())
                .batchWindow(config.engine().batchWindow())
                .prefixCacheBytes(config.engine().prefixCacheBytes().map(MemorySize::asLongValue).orElse(-1L))
                .rewrite(new RewriteOptions(config.engine().lastPositionLogits(), precision, config.engine().fuseNorms(), config.engine().fuseRotary(),
                        config.engine().packProjections(), config.engine().fuseAttention(), kvDtype)
                        .withLoraModules(loraModules(entry)).withNativeAttention(config.engine().nativeAttention())
                        .withNativeMatMul(nativeMatMul(config.engine().nativeMatmul())))
                .rewriteCache(config.modelCacheDir().resolve("rewritten"))
                .intraOpSpinMicros(spinMicros(config.intraOpSpinning(), config.intraOpSpinMicros()))
                .kvInPlace(config.engine().kvInPlace())
                .kvCacheBytes(entry.kvCacheBytes() != null ? entry.kvCacheBytes() : config.engine().kvCacheBytes().map(MemorySize::asLongValue).orElse(-1L))
                .queueTimeout(config.engine().queueTimeout()).speculative(speculative())
                .build();
    }

    /** ORTSERVE_ENGINE_NATIVE_MATMUL: true, false, or auto (where it is the faster kernel on this CPU). */
    static boolean nativeMatMul(String setting) {
        return switch (setting.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            case "auto" -> {
                boolean faster = RewriteOptions.nativeMatMulFasterHere();
                LOG.infof("ORTSERVE_ENGINE_NATIVE_MATMUL=auto: %s", faster ? "the native quantized MatMul (onnxruntime's MatMulNBits runs its AVX2 kernel here)"
                        : "onnxruntime's MatMulNBits (this CPU has AVX-512 or AVX-VNNI, or no AVX2: onnxruntime's kernel is the default here)");
                yield faster;
            }
            default -> throw new ModelLoadException("ORTSERVE_ENGINE_NATIVE_MATMUL: auto, true or false, not '" + setting + "'");
        };
    }

    /** The projections that get LoRA inputs: those the model's adapters target, every one when adapters may load at runtime. */
    private java.util.Set<String> loraModules(ModelEntry entry) {
        java.util.Set<String> modules = new java.util.TreeSet<>(LoraAdapters.targetModules(entry.adapters().stream().map(ModelEntry.Adapter::path).toList()));
        if (config.allowRuntimeLoraUpdating()) modules.addAll(java.util.List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"));
        return modules;
    }

    /** ORTSERVE_SPECULATIVE_* as the engine takes them. */
    private SpeculativeOptions speculative() {
        OrtserveConfig.Speculative s = config.speculative();
        try {
            return new SpeculativeOptions(s.numSpeculativeTokens(), s.promptLookup(), s.promptLookupMin(), s.promptLookupMax(), s.maxBatch());
        } catch (IllegalArgumentException e) {
            throw new ModelLoadException("ORTSERVE_SPECULATIVE_*: " + e.getMessage(), e);
        }
    }

    /** The model's own template, or the one ORTSERVE_CHAT_TEMPLATE names. */
    private String chatTemplate(LoadedModel model, ModelEntry entry) {
        Optional<Path> configured = Optional.ofNullable(entry.chatTemplate()).or(config::chatTemplate);
        if (configured.isEmpty()) return model.chatTemplate();
        Path file = configured.get();
        try {
            return Files.readString(file);
        } catch (IOException e) {
            throw new ModelLoadException("ORTSERVE_CHAT_TEMPLATE: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** ORTSERVE_INTRA_OP_SPINNING and ORTSERVE_INTRA_OP_SPIN_MICROS as the engine takes them (0: not spinning). */
    static int spinMicros(boolean spinning, int micros) {
        if (!spinning) return 0;
        if (micros == 0 || micros < EngineOptions.SPIN_UNBOUNDED) {
            throw new ModelLoadException("ORTSERVE_INTRA_OP_SPIN_MICROS must be positive (microseconds) or -1 "
                    + "(onnxruntime's own spin loop), not " + micros + "; ORTSERVE_INTRA_OP_SPINNING=false turns spinning off");
        }
        return micros;
    }
}
