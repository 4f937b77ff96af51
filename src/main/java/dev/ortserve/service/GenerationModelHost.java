package dev.ortserve.service;

import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.UnavailableException;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import io.quarkus.runtime.configuration.MemorySize;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;

/**
 * The served model's lifecycle: at startup loads the decoder (a directory, a Hub id, or the
 * generated demo model), chooses its parsers, starts and warms up its engine, registers its gauges,
 * and publishes the result as one {@link ServedModel} value; closes the engine at shutdown. A model
 * that cannot be loaded stops the server at startup with the loader's message.
 */
@ApplicationScoped
public class GenerationModelHost {

    private static final Logger LOG = Logger.getLogger(GenerationModelHost.class);
    public static final String DEMO_MODEL_ID = "demo";

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

    /** Set once the model is loaded and warmed up. */
    private volatile ServedModel served;
    /** Known before loading (so /v1/models and errors can name it). */
    private String modelId;

    void start(@Observes StartupEvent event) {
        // configuration mistakes fail before the model is loaded, with the valid names listed
        config.toolCallParser().filter(n -> !n.equals(dev.ortserve.service.parse.ParserSelection.NONE))
                .ifPresent(dev.ortserve.service.parse.Parsers::toolCalls);
        config.reasoningParser().filter(n -> !n.equals(dev.ortserve.service.parse.ParserSelection.NONE))
                .ifPresent(dev.ortserve.service.parse.Parsers::reasoning);
        Path dir;
        String defaultName;
        String source;
        if (config.modelPath().isPresent()) {
            ModelSources.Located located = modelSources.locate(config.modelPath().get().toString(), config.modelRevision(), config.modelFile());
            dir = located.directory();
            defaultName = located.defaultId();
            source = located.source();
        } else {
            try {
                dir = ModelGenerator.ensure(ModelSize.DEMO, config.modelCacheDir());
            } catch (IOException e) {
                throw new UncheckedIOException("Cannot build the demo model in " + config.modelCacheDir(), e);
            }
            defaultName = DEMO_MODEL_ID;
            source = dir.toString();
        }
        modelId = config.modelName().orElse(defaultName);
        WeightPrecision precision;
        try {
            precision = WeightPrecision.parse(config.engine().weightPrecision());
        } catch (IllegalArgumentException e) {
            throw new dev.ortserve.engine.ModelLoadException("ORTSERVE_ENGINE_WEIGHT_PRECISION: " + e.getMessage(), e);
        }
        EngineOptions options = new EngineOptions(config.executionProvider().name(), config.cudaDeviceId(),
                config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors()),
                config.engine().maxSequences(), config.engine().queueCapacity(), config.engine().prefillChunkTokens(),
                config.engine().maxModelLen(), config.engine().batchWindow(),
                config.engine().prefixCacheBytes().map(MemorySize::asLongValue).orElse(-1L),
                new RewriteOptions(config.engine().lastPositionLogits(), precision, config.engine().fuseNorms(), config.engine().fuseRotary(),
                        config.engine().packProjections()), config.modelCacheDir().resolve("rewritten"),
                spinMicros(config));
        LoadedModel model = ModelLoader.load(dir, options, config.modelFile());
        String template = model.chatTemplate();
        if (config.chatTemplate().isPresent()) {
            Path file = config.chatTemplate().get();
            try {
                template = java.nio.file.Files.readString(file);
            } catch (IOException e) {
                model.close();
                throw new dev.ortserve.engine.ModelLoadException("ORTSERVE_CHAT_TEMPLATE: cannot read " + file + ": " + e.getMessage(), e);
            }
        }
        ChatPromptRenderer chatPrompts;
        try {
            chatPrompts = new ChatPromptRenderer(model, template, java.time.Clock.systemUTC(),
                    new dev.ortserve.service.prompt.jinja.Template.Limits(config.chatTemplateTimeout(), config.chatTemplateMaxChars()));
            chatPrompts.probe();
        } catch (RuntimeException e) {
            model.close();
            throw e;
        }
        var parsers = dev.ortserve.service.parse.ParserSelection.choose(config.toolCallParser(), config.reasoningParser(),
                new dev.ortserve.service.parse.ParserSelection.ModelHints(template, model.tokenizer().addedTokens(), chatPrompts.generationPrompt()));
        if (parsers.tools() != null) chatPrompts.callIds(parsers.tools()::templateCallId);
        LOG.infof("Model parsers: %s", parsers.describe());
        ContinuousBatchingEngine batching = new ContinuousBatchingEngine(model, options,
                runnerDecorators.isResolvable() ? runnerDecorators.get() : runner -> runner);
        batching.listener(metrics.engineListener(modelId));
        metrics.prefixCache(modelId, batching::prefixCache);
        Gauge.builder("ortserve_requests_running", batching, GenerationEngine::runningSequences)
                .description("Sequences being prefilled or decoded").tag("model", modelId).register(registry);
        Gauge.builder("ortserve_requests_waiting", batching, GenerationEngine::waitingSequences)
                .description("Sequences waiting in the admission queue").tag("model", modelId).register(registry);
        warmUp(batching, model);
        served = new ServedModel(modelId, source, model, batching, chatPrompts, parsers, Instant.now().getEpochSecond());
        LOG.infof("Serving model '%s' from %s", modelId, dir);
    }

    /** ORTSERVE_INTRA_OP_SPINNING and ORTSERVE_INTRA_OP_SPIN_MICROS as the engine takes them (0: not spinning). */
    static int spinMicros(OrtserveConfig config) {
        return spinMicros(config.intraOpSpinning(), config.intraOpSpinMicros());
    }

    static int spinMicros(boolean spinning, int micros) {
        if (!spinning) return 0;
        if (micros == 0 || micros < EngineOptions.SPIN_UNBOUNDED) {
            throw new dev.ortserve.engine.ModelLoadException("ORTSERVE_INTRA_OP_SPIN_MICROS must be positive (microseconds) or -1 "
                    + "(onnxruntime's own spin loop), not " + micros + "; ORTSERVE_INTRA_OP_SPINNING=false turns spinning off");
        }
        return micros;
    }

    private static void warmUp(GenerationEngine engine, LoadedModel model) {
        int[] prompt = model.tokenizer().encode("warm up");
        if (prompt.length == 0) prompt = new int[] {0};
        engine.generate(new dev.ortserve.engine.GenerationRequest("warmup", prompt, SamplingParams.greedy(1)))
                .collect().last().await().atMost(Duration.ofMinutes(5));
    }

    void stop(@Observes ShutdownEvent event) {
        ServedModel s = served;
        if (s != null) {
            GenerationEngine engine = s.engine();
            engine.close();
            // When the JVM itself is exiting, ONNX Runtime's own shutdown hook releases the native
            // environment concurrently: releasing the session as well could race it. The process is
            // ending; its memory goes with it. (Tests restart the application in one JVM: close there.)
            if (!jvmExiting()) engine.model().close();
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

    public boolean ready() {
        return served != null;
    }

    public String modelId() {
        return modelId;
    }

    /** What is served; 503 model_not_ready while it loads. */
    public ServedModel served() {
        ServedModel s = served;
        if (s == null) {
            throw new UnavailableException("The model is still loading.", "model_not_ready");
        }
        return s;
    }

    /** 503 model_not_ready while the model loads; for requests that check it before reading their body further. */
    public void requireReady() {
        served();
    }

    public GenerationEngine engine() {
        return served().engine();
    }

    public LoadedModel model() {
        return served().model();
    }

    /** The model's chat template and tokenizer, as chat completions and /tokenize use them. */
    public ChatPromptRenderer chatPrompts() {
        return served().chatPrompts();
    }

    /** The model's tool-call parser (configured or detected), or null when tool calling is off. */
    public dev.ortserve.service.parse.ToolCallParser toolCallParser() {
        return served().toolCallParser();
    }

    /** The model's reasoning parser (configured or detected), or null. */
    public dev.ortserve.service.parse.ReasoningParser reasoningParser() {
        return served().reasoningParser();
    }

    /** The parsers chosen at startup and where each choice came from. */
    public dev.ortserve.service.parse.ParserSelection parsers() {
        return served().parsers();
    }

    /** Where the served model came from: its directory, or owner/name@commit for a Hub model; null while loading. */
    public String source() {
        ServedModel s = served;
        return s == null ? null : s.source();
    }

    /** Checks the request's model id before anything else is done with the request. */
    public void requireModel(String requested) {
        if (!modelId.equals(requested)) {
            throw new ModelNotFoundException(requested);
        }
    }

    public ServedModelInfo info() {
        ServedModel s = served;
        return new ServedModelInfo(modelId, ServedModelInfo.Kind.GENERATION,
                s != null ? s.model().spec().maxModelLen() : 0,
                s != null ? s.model().directory().toString() : null, s != null ? s.createdAt() : 0,
                s == null ? null : s.parsers().toolsName(), s == null ? null : s.parsers().reasoningName());
    }
}
