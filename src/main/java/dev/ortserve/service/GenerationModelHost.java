package dev.ortserve.service;

import dev.ortserve.service.error.ModelNotFoundException;
import dev.ortserve.service.error.UnavailableException;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
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

/**
 * The served model's lifecycle: at startup finds the decoder (a directory, a Hub id, or the
 * generated demo model), has {@link ServedModelAssembler} build the model, its prompts, parsers and engine, registers its gauges, warms it up,
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
        ServedModelAssembler assembler = new ServedModelAssembler(config,
                runnerDecorators.isResolvable() ? runnerDecorators.get() : runner -> runner);
        assembler.checkSettings();
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
        Path servedDir = dir;
        Path draftDir = config.speculative().draftModelPath().map(p -> p.equals("self") ? servedDir
                : modelSources.locate(p, java.util.Optional.empty(), java.util.Optional.empty()).directory()).orElse(null);
        ServedModel assembled = assembler.assemble(modelId, source, dir, draftDir, batching -> {
            batching.listener(metrics.engineListener(modelId));
            metrics.prefixCache(modelId, batching::prefixCache);
            metrics.kvBudget(modelId, batching::kvHeldBytes, batching.kvBudgetBytes(), batching::queueTimeouts);
            metrics.speculativeDecoding(modelId, batching::draftTokens, batching::acceptedDraftTokens);
        });
        metrics.memoryBudget(assembled.memory());
        GenerationEngine engine = assembled.engine();
        Gauge.builder("ortserve_requests_running", engine, GenerationEngine::runningSequences)
                .description("Sequences being prefilled or decoded").tag("model", modelId).register(registry);
        Gauge.builder("ortserve_requests_waiting", engine, GenerationEngine::waitingSequences)
                .description("Sequences waiting in the admission queue").tag("model", modelId).register(registry);
        warmUp(engine, assembled.model());
        served = assembled;
        LOG.infof("Serving model '%s' from %s", modelId, dir);
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

    /** The served model's context length in tokens. */
    public int contextLength() {
        return model().spec().maxModelLen();
    }

    /** How many tokens the served model's tokenizer makes of a text (no special tokens added). */
    public int countTokens(String text) {
        return model().tokenizer().encode(text).length;
    }

    /** The model's token ids of {@code text}, without special tokens (a predicted output's). */
    public int[] encode(String text) {
        return model().tokenizer().encode(text, false);
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
    public dev.ortserve.parse.ToolCallParser toolCallParser() {
        return served().toolCallParser();
    }

    /** The model's reasoning parser (configured or detected), or null. */
    public dev.ortserve.parse.ReasoningParser reasoningParser() {
        return served().reasoningParser();
    }

    /** The parsers chosen at startup and where each choice came from. */
    public dev.ortserve.parse.ParserSelection parsers() {
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
