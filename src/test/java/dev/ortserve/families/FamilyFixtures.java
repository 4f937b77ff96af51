package dev.ortserve.families;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.zip.GZIPInputStream;

/**
 * The model-family fixtures ({@code src/test/resources/fixtures/families/<family>}, made by
 * {@code make_fixtures.py} there with transformers) as a model directory: the large files are
 * committed gzipped and unpacked once into {@code target/test-models/families/<family>}.
 */
public final class FamilyFixtures {

    public static final Path SOURCE = Path.of("src/test/resources/fixtures/families");

    private FamilyFixtures() {
    }

    /** The unpacked model directory of a family (qwen3, llama3_1, gemma3). */
    public static synchronized Path directory(String family) {
        Path src = SOURCE.resolve(family);
        Path dir = Path.of("target", "test-models", "families", family).toAbsolutePath();
        try {
            Files.createDirectories(dir);
            for (String name : new String[] {"config.json", "generation_config.json"}) {
                Files.copy(src.resolve(name), dir.resolve(name), StandardCopyOption.REPLACE_EXISTING);
            }
            for (String name : new String[] {"tokenizer.json", "tokenizer_config.json", "model.onnx"}) {
                gunzip(src.resolve(name + ".gz"), dir.resolve(name));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return dir;
    }

    /** A gzipped tokenizer.json of the fixtures (families or detokenize), unpacked next to the models. */
    public static synchronized Path tokenizer(String gz) {
        Path target = Path.of("target", "test-models", "families", "tokenizers", gz.replace('/', '-').replace(".gz", "")).toAbsolutePath();
        try {
            Files.createDirectories(target.getParent());
            gunzip(SOURCE.resolve(gz), target);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return target;
    }

    /** Unpacks unless the target is newer than the source (a previous run unpacked it completely: it is moved in). */
    private static void gunzip(Path gz, Path target) throws IOException {
        if (Files.isRegularFile(target) && Files.getLastModifiedTime(target).compareTo(Files.getLastModifiedTime(gz)) > 0) return;
        Path tmp = target.resolveSibling(target.getFileName() + ".part");
        try (InputStream in = new GZIPInputStream(Files.newInputStream(gz), 1 << 16)) {
            Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
        }
        Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }
}
