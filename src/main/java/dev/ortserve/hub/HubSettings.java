package dev.ortserve.hub;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Function;

/**
 * Where the Hub is and where its files are cached, read from the environment variables that
 * huggingface_hub reads, so that ortserve and huggingface-cli / transformers / vLLM share one cache:
 * HF_ENDPOINT, HF_HUB_CACHE (else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub), HF_TOKEN (else the token file HF_TOKEN_PATH, else HF_HOME/token),
 * HF_HUB_OFFLINE.
 *
 * @param progressInterval how often a running download logs its progress
 * @param attempts         tries per request on timeouts, cut connections and 5xx answers
 * @param backoff          wait before the second try; doubled for each further one
 */
public record HubSettings(URI endpoint, Path cacheDir, Optional<String> token, boolean offline, Duration timeout,
                          Duration progressInterval, int attempts, Duration backoff) {

    public static final String DEFAULT_ENDPOINT = "https://huggingface.co";

    /** Reads the settings with {@code lookup} (environment variables or configuration properties by their names). */
    public static HubSettings from(Function<String, Optional<String>> lookup) {
        String home = System.getProperty("user.home");
        Path hfHome = lookup.apply("HF_HOME").map(HubSettings::expand).map(Path::of)
                .orElseGet(() -> lookup.apply("XDG_CACHE_HOME").map(HubSettings::expand).map(Path::of)
                        .orElse(Path.of(home, ".cache")).resolve("huggingface"));
        Path cache = lookup.apply("HF_HUB_CACHE").or(() -> lookup.apply("HUGGINGFACE_HUB_CACHE"))
                .map(HubSettings::expand).map(Path::of).orElse(hfHome.resolve("hub"));
        Optional<String> token = lookup.apply("HF_TOKEN").or(() -> lookup.apply("HUGGING_FACE_HUB_TOKEN"))
                .map(String::strip).filter(t -> !t.isEmpty());
        if (token.isEmpty()) {
            Path tokenFile = lookup.apply("HF_TOKEN_PATH").map(HubSettings::expand).map(Path::of).orElse(hfHome.resolve("token"));
            token = readToken(tokenFile);
        }
        boolean offline = lookup.apply("HF_HUB_OFFLINE").or(() -> lookup.apply("TRANSFORMERS_OFFLINE")).map(HubSettings::isTrue).orElse(false);
        URI endpoint = URI.create(lookup.apply("HF_ENDPOINT").map(e -> e.replaceAll("/+$", "")).orElse(DEFAULT_ENDPOINT));
        return new HubSettings(endpoint, cache, token, offline, Duration.ofSeconds(30), Duration.ofSeconds(5), 5, Duration.ofSeconds(1));
    }

    public HubSettings withRetries(int attempts, Duration backoff) {
        return new HubSettings(endpoint, cacheDir, token, offline, timeout, progressInterval, attempts, backoff);
    }

    public HubSettings withTimeout(Duration t) {
        return new HubSettings(endpoint, cacheDir, token, offline, t, progressInterval, attempts, backoff);
    }

    public HubSettings withToken(Optional<String> t) {
        return new HubSettings(endpoint, cacheDir, t, offline, timeout, progressInterval, attempts, backoff);
    }

    public HubSettings withOffline(boolean off) {
        return new HubSettings(endpoint, cacheDir, token, off, timeout, progressInterval, attempts, backoff);
    }

    private static Optional<String> readToken(Path file) {
        try {
            return Files.isRegularFile(file) ? Optional.of(Files.readString(file).strip()).filter(t -> !t.isEmpty()) : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    private static boolean isTrue(String v) {
        return switch (v.strip().toUpperCase()) {
            case "1", "ON", "YES", "TRUE" -> true;
            default -> false;
        };
    }

    private static String expand(String path) {
        return path.startsWith("~/") || path.equals("~") ? System.getProperty("user.home") + path.substring(1) : path;
    }
}
