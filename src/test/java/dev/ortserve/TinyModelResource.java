package dev.ortserve;

import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Map;

/** Serves the generated tiny model (seeded, built once into target/) to every @QuarkusTest. */
public class TinyModelResource implements QuarkusTestResourceLifecycleManager {

    public static final String MODEL_ID = "tiny";
    public static final long SEED = 7;

    public static Path directory() {
        Path dir = Path.of("target", "test-models", "tiny-" + SEED).toAbsolutePath();
        try {
            if (!dir.resolve("model.onnx").toFile().isFile()) {
                ModelGenerator.generate(ModelSize.TINY, SEED, dir);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return dir;
    }

    @Override
    public Map<String, String> start() {
        return Map.of("ortserve.model-path", directory().toString(), "ortserve.model-name", MODEL_ID);
    }

    @Override
    public void stop() {
    }
}
