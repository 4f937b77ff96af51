package dev.ortserve.service;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.LoadedModel;
import io.quarkus.runtime.StartupEvent;
import jakarta.annotation.Priority;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import org.eclipse.microprofile.config.ConfigProvider;
import org.jboss.logging.Logger;

import java.util.List;
import java.util.Locale;

/**
 * One line at the end of startup that says what is served and how: the model and where it came
 * from (a path, or a Hub id at its commit), its layout, KV dtype and weight precision, the parsers,
 * the execution provider and threads, the embedding model, the conversation store and the address.
 */
@ApplicationScoped
public class StartupSummary {

    private static final Logger LOG = Logger.getLogger(StartupSummary.class);

    @Inject
    OrtserveConfig config;

    @Inject
    GenerationModelHost generation;

    @Inject
    EmbeddingModelHost embedding;

    // after the model hosts (default observer priority 2500) have loaded their models
    void log(@Observes @Priority(3000) StartupEvent event) {
        ServedModel served = generation.defaultModel();
        var quarkus = ConfigProvider.getConfig();
        String host = quarkus.getOptionalValue("quarkus.http.host", String.class).orElse("0.0.0.0");
        String port = quarkus.getOptionalValue("quarkus.http.port", String.class).orElse("8080");
        if (served == null) {
            // a models file with no pinned model: each loads on its first request, nothing is loaded yet
            LOG.infof("Serving on demand: %s; %s with %d threads; embeddings '%s'; store %s; listening on http://%s:%s",
                    generation.info().stream().map(m -> "'" + m.id() + "'").collect(java.util.stream.Collectors.joining(", ")),
                    config.executionProvider(), config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors()),
                    embedding.modelId(), config.store(), host, port);
            return;
        }
        LoadedModel model = served.model();
        // a vision-language export serves its decoder composed with its embedding, in the rewrite cache
        String file = model.modelFile().startsWith(model.directory()) ? model.directory().relativize(model.modelFile()).toString().replace('\\', '/')
                : model.modelFile().toString();
        LOG.infof("Serving '%s' from %s: %s layout, %s (%s, KV %s), tool calls %s, reasoning %s, %s with %d threads (%s); "
                        + "embeddings '%s'; store %s; listening on http://%s:%s",
                served.id(), served.source(), model.spec().layout().name().toLowerCase(Locale.ROOT), file,
                model.spec().layout() == dev.ortserve.engine.ModelLayout.GENAI ? "model-builder weights" : served(file, model.rewrites()),
                model.spec().kvType().name().toLowerCase(Locale.ROOT),
                served.toolCallParser() == null ? "off" : served.toolCallParser().name(),
                served.reasoningParser() == null ? "off" : served.reasoningParser().name(),
                config.executionProvider(), config.intraOpThreads().orElse(Runtime.getRuntime().availableProcessors()),
                spinning(ServedModelAssembler.spinMicros(config.intraOpSpinning(), config.intraOpSpinMicros())), embedding.modelId(), config.store(), host, port);
        List<ServedModelInfo> others = generation.info().stream().filter(m -> !m.id().equals(served.id())).toList();
        if (!others.isEmpty()) {
            LOG.infof("Also served: %s", others.stream().map(m -> "'" + m.id() + "' (" + (m.pinned() ? "pinned, " : "") + m.state() + ")")
                    .collect(java.util.stream.Collectors.joining(", ")));
        }
    }

    static String spinning(int micros) {
        return micros == 0 ? "not spinning" : micros < 0 ? "spinning" : "spinning up to " + micros + " us";
    }

    /** The precision served: the one the weights were quantized to on load, else the file's own. */
    static String served(String file, java.util.List<String> rewrites) {
        for (String r : rewrites) {
            if (r.startsWith("int8 weights") || r.startsWith("int4 weights")) return r.substring(0, 4) + " weights quantized on load from " + precision(file);
        }
        return precision(file) + " weights";
    }

    /** The weight precision an ONNX file's name announces (the export tools' naming); full precision when it announces none. */
    static String precision(String file) {
        String name = file.substring(file.lastIndexOf('/') + 1).replace(".onnx", "");
        for (String suffix : new String[] {"q4f16", "fp16", "bnb4", "q4", "int8", "uint8", "quantized", "int4"}) {
            if (name.endsWith("_" + suffix) || name.contains(suffix)) return suffix;
        }
        return "fp32";
    }
}
