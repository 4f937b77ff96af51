package dev.ortserve.engine.load;

import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Optional;

/**
 * ortserve's onnxruntime custom-op library ({@code src/main/native}, built by the Maven build into the class path):
 * {@code dev.ortserve.GroupQueryAttention}, onnxruntime's GroupQueryAttention with decode steps computed by ortserve
 * (each KV head read once for the query heads that share it) and prompts handed to onnxruntime's own kernel. Found once
 * per process: used in place when the class path is a directory, else copied out of the jar into a temporary file
 * (onnxruntime loads a library from a path). Built for Linux on x86-64 only; elsewhere it is absent and the engine
 * serves onnxruntime's op ({@code GraphRewriter}'s native attention is then not asked for).
 */
public final class NativeOps {

    private static final Logger LOG = Logger.getLogger(NativeOps.class);
    static final String RESOURCE = "/native/linux-x86_64/libortserve_ops.so";

    private NativeOps() {
    }

    private static final class Holder {
        static final Optional<Path> LIBRARY = locate();
    }

    /** The library's path, where this platform has it. */
    public static Optional<Path> library() {
        return Holder.LIBRARY;
    }

    /** The library is there to register (Linux x86-64, built). */
    public static boolean available() {
        return library().isPresent();
    }

    private static Optional<Path> locate() {
        String os = System.getProperty("os.name", ""), arch = System.getProperty("os.arch", "");
        if (!os.toLowerCase().startsWith("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) return Optional.empty();
        URL url = NativeOps.class.getResource(RESOURCE);
        if (url == null) {
            LOG.warnf("The native attention library %s is not on the class path (the build compiles it with g++): decode steps use "
                    + "onnxruntime's GroupQueryAttention", RESOURCE);
            return Optional.empty();
        }
        try {
            if (url.getProtocol().equals("file")) return Optional.of(Path.of(url.toURI()));
            Path file = Files.createTempFile("libortserve_ops", ".so");
            file.toFile().deleteOnExit();
            try (InputStream in = url.openStream()) {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            }
            return Optional.of(file);
        } catch (IOException | URISyntaxException | RuntimeException e) {
            LOG.warnf("The native attention library cannot be unpacked (%s): decode steps use onnxruntime's GroupQueryAttention", e.getMessage());
            return Optional.empty();
        }
    }
}
