package dev.ortserve.it;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** A default start of the packaged jar logs at most two WARN lines, and says what it serves in one summary line. */
class QuietStartIT {

    /** ONNX Runtime's native log lines of severity warning or worse ("[W:onnxruntime:, graph.cc:1234 ...]", E, F). */
    static final java.util.regex.Pattern NATIVE_WARNING = java.util.regex.Pattern.compile("\\[[WEF]:onnxruntime:");

    @Test
    void aDefaultStartIsQuietAndSaysWhatItServes() throws Exception {
        // defaults everywhere; only the demo model's cache goes to target/ instead of the home directory
        Map<String, String> env = Map.of("ORTSERVE_MODEL_CACHE_DIR", Path.of("target", "it-quiet-start-models").toAbsolutePath().toString());
        String log;
        try (PackagedApp app = PackagedApp.start("quiet-start", env)) {
            log = app.log();
        }
        List<String> warnings = log.lines().filter(l -> l.contains(" WARN ")).toList();
        assertTrue(warnings.size() <= 2, "WARN lines of a default start:\n" + String.join("\n", warnings));
        // ONNX Runtime's native log goes to the process's stdout/stderr, past the Java logging: "[W:onnxruntime:...]" lines
        List<String> native_ = log.lines().filter(l -> NATIVE_WARNING.matcher(l).find()).toList();
        assertTrue(native_.isEmpty(), "native ONNX Runtime warnings of a default start:\n" + String.join("\n", native_));
        assertTrue(log.lines().anyMatch(l -> l.contains("Serving 'demo' from ") && l.contains("optimum layout, model.onnx (fp32 weights, KV float16)")
                && l.contains("embeddings 'all-minilm-l6-v2'; store memory; listening on http://")), log);
    }
}
