package dev.ortserve.hub;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.jboss.logging.Logger;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The part of the Hub's HTTP API that serving needs: a revision's commit and file list
 * ({@code GET /api/models/{repo}/revision/{rev}?blobs=true}), a file's metadata
 * ({@code HEAD /{repo}/resolve/{commit}/{path}}: X-Repo-Commit, X-Linked-Etag / ETag,
 * X-Linked-Size) and its contents (GET, resumed with Range). Timeouts, cut connections and 5xx
 * answers are retried with exponential backoff; 401, 403 and 404 become {@link HubException}s
 * that say what to do.
 */
public final class HubClient {

    private static final Logger LOG = Logger.getLogger(HubClient.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One file of a revision; {@code sha256} is known for LFS files. */
    public record RepoFile(String path, long size, Optional<String> sha256) { }

    public record RevisionInfo(String commit, List<RepoFile> files) { }

    /** What HEAD on a file says: the etag names the blob; for LFS files it is the contents' sha256. */
    public record FileMeta(String commit, String etag, OptionalLong size) { }

    /** Bytes received so far and the total when known; called as data arrives. */
    public interface Progress {
        void update(long received, long total);
    }

    private final HubSettings settings;
    private final HttpClient http;

    public HubClient(HubSettings settings) {
        this.settings = settings;
        this.http = HttpClient.newBuilder().connectTimeout(settings.timeout()).followRedirects(HttpClient.Redirect.NEVER).build();
    }

    public RevisionInfo revision(HubRepoId id) {
        URI uri = URI.create(settings.endpoint() + "/api/models/" + id.repo() + "/revision/" + encode(id.revision()) + "?blobs=true");
        HttpResponse<byte[]> response = withRetries("revision " + id, () -> {
            URI current = uri;
            for (int hop = 0; ; hop++) {
                HttpResponse<byte[]> r = send(request(current).GET().build(), HttpResponse.BodyHandlers.ofByteArray());
                Optional<String> location = r.headers().firstValue("Location");
                // a renamed or moved repository answers with a relative redirect to its new name
                if (r.statusCode() / 100 != 3 || location.isEmpty() || URI.create(location.get()).isAbsolute() || hop >= 5) return r;
                current = current.resolve(location.get());
            }
        });
        check(response, id, null);
        try {
            JsonNode body = JSON.readTree(response.body());
            String commit = body.path("sha").asText(null);
            if (commit == null) throw new HubException(HubException.Kind.PROTOCOL, "The Hub's answer for " + id + " has no commit (sha)");
            List<RepoFile> files = new ArrayList<>();
            for (JsonNode sibling : body.path("siblings")) {
                JsonNode lfs = sibling.path("lfs");
                files.add(new RepoFile(sibling.path("rfilename").asText(), lfs.path("size").asLong(sibling.path("size").asLong(-1)),
                        lfs.hasNonNull("sha256") ? Optional.of(lfs.get("sha256").asText()) : Optional.empty()));
            }
            return new RevisionInfo(commit, files);
        } catch (IOException e) {
            throw new HubException(HubException.Kind.PROTOCOL, "The Hub's answer for " + id + " is not JSON: " + e.getMessage(), e);
        }
    }

    public FileMeta head(HubRepoId id, String commit, String file) {
        URI uri = resolveUri(id.repo(), commit, file);
        return withRetries("metadata of " + file, () -> {
            URI current = uri;
            for (int hop = 0; hop < 5; hop++) {
                HttpResponse<Void> r = send(request(current).header("Accept-Encoding", "identity").method("HEAD", HttpRequest.BodyPublishers.noBody()).build(),
                        HttpResponse.BodyHandlers.discarding());
                HttpHeaders h = r.headers();
                Optional<String> location = h.firstValue("Location");
                // like huggingface_hub: follow relative redirects (a renamed repo); an absolute one (the CDN) already carries the metadata
                if (r.statusCode() / 100 == 3 && location.isPresent() && !URI.create(location.get()).isAbsolute()) {
                    current = current.resolve(location.get());
                    continue;
                }
                if (r.statusCode() / 100 != 2 && r.statusCode() / 100 != 3) check(r, id, file);
                String etag = h.firstValue("X-Linked-Etag").or(() -> h.firstValue("ETag"))
                        .map(e -> e.replaceFirst("^W/", "").replace("\"", "")).orElse(null);
                if (etag == null) throw new HubException(HubException.Kind.PROTOCOL, "The Hub sent no ETag for " + file);
                String size = h.firstValue("X-Linked-Size").orElse(r.statusCode() / 100 == 2 ? h.firstValue("Content-Length").orElse(null) : null);
                return new FileMeta(h.firstValue("X-Repo-Commit").orElse(commit), etag,
                        size == null ? OptionalLong.empty() : OptionalLong.of(Long.parseLong(size)));
            }
            throw new HubException(HubException.Kind.PROTOCOL, "Too many redirects for " + file);
        });
    }

    /**
     * Downloads {@code file} into {@code partial}, continuing from the bytes it already holds
     * (Range) across retries; returns when the whole file is there.
     */
    public void download(HubRepoId id, String commit, String file, Path partial, long expectedSize, Progress progress) {
        URI uri = resolveUri(id.repo(), commit, file);
        withRetries("download of " + file, () -> {
            long have = Files.exists(partial) ? Files.size(partial) : 0;
            if (expectedSize >= 0 && have == expectedSize) return null;
            if (expectedSize >= 0 && have > expectedSize) {
                Files.delete(partial);
                have = 0;
            }
            URI current = uri;
            HttpResponse<InputStream> r = null;
            for (int hop = 0; hop < 5; hop++) {
                HttpRequest.Builder b = current.getHost() != null && current.getHost().equals(uri.getHost()) ? request(current) : bare(current);
                if (have > 0) b.header("Range", "bytes=" + have + "-");
                r = send(b.header("Accept-Encoding", "identity").GET().build(), HttpResponse.BodyHandlers.ofInputStream());
                Optional<String> location = r.headers().firstValue("Location");
                if (r.statusCode() / 100 == 3 && location.isPresent()) {
                    r.body().close();
                    current = current.resolve(location.get());
                    continue;
                }
                break;
            }
            if (r.statusCode() == 416 && have > 0) {
                r.body().close();
                Files.delete(partial); // the partial file is longer than the blob: start over
                throw new IOException("range not satisfiable; restarting " + file);
            }
            if (r.statusCode() / 100 != 2) {
                r.body().close();
                check(r, id, file);
            }
            boolean append = r.statusCode() == 206 && have > 0;
            if (!append) have = 0;
            try (InputStream in = r.body();
                 OutputStream out = Files.newOutputStream(partial, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                         append ? StandardOpenOption.APPEND : StandardOpenOption.TRUNCATE_EXISTING)) {
                byte[] buffer = new byte[1 << 16];
                long received = have;
                int n;
                while ((n = in.read(buffer)) >= 0) {
                    try {
                        out.write(buffer, 0, n);
                    } catch (IOException e) {
                        throw new HubException(HubException.Kind.DISK_FULL, "Cannot write " + file + " to " + partial.getParent()
                                + " (" + e.getMessage() + "): the cache volume is full or read-only; free space or point HF_HUB_CACHE elsewhere", e);
                    }
                    received += n;
                    progress.update(received, expectedSize);
                }
                if (expectedSize >= 0 && received < expectedSize) {
                    throw new IOException("connection closed after " + received + " of " + expectedSize + " bytes");
                }
            }
            return null;
        });
    }

    private URI resolveUri(String repo, String commit, String file) {
        StringBuilder path = new StringBuilder();
        for (String part : file.split("/")) {
            if (path.length() > 0) path.append('/');
            path.append(encode(part));
        }
        return URI.create(settings.endpoint() + "/" + repo + "/resolve/" + encode(commit) + "/" + path);
    }

    private HttpRequest.Builder request(URI uri) {
        HttpRequest.Builder b = bare(uri);
        settings.token().ifPresent(t -> b.header("Authorization", "Bearer " + t));
        return b;
    }

    private HttpRequest.Builder bare(URI uri) {
        return HttpRequest.newBuilder(uri).timeout(settings.timeout()).header("User-Agent", "ortserve");
    }

    private <T> HttpResponse<T> send(HttpRequest request, HttpResponse.BodyHandler<T> handler) throws IOException {
        try {
            HttpResponse<T> r = http.send(request, handler);
            if (r.statusCode() >= 500 || r.statusCode() == 429) {
                if (r.body() instanceof InputStream in) in.close();
                throw new RetryableStatus(r.statusCode());
            }
            return r;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
    }

    private void check(HttpResponse<?> r, HubRepoId id, String file) {
        int status = r.statusCode();
        if (status / 100 == 2) return;
        String code = r.headers().firstValue("X-Error-Code").orElse("");
        String what = file == null ? id.toString() : file + " of " + id;
        switch (status) {
            case 401 -> throw new HubException(HubException.Kind.UNAUTHORIZED, settings.token().isPresent()
                    ? "The Hub refused the token for " + id + " (401): it is invalid or expired; set HF_TOKEN to a valid token"
                    : "The Hub needs a token for " + id + " (401: a private or gated repository, or no such repository): set HF_TOKEN "
                    + "(or log in with `hf auth login`, whose token file is read)");
            case 403 -> throw new HubException(HubException.Kind.FORBIDDEN, "The token has no access to " + id + " (403"
                    + ("GatedRepo".equals(code) ? ", a gated repository: accept its conditions on the Hub with this account" : "")
                    + "): use a token of an account that can read it, with read permission");
            case 404 -> throw new HubException(HubException.Kind.NOT_FOUND, switch (code) {
                case "RevisionNotFound" -> "The Hub has no revision '" + id.revision() + "' of " + id.repo() + " (404)";
                case "EntryNotFound" -> "The Hub has no file " + what + " (404)";
                default -> file == null ? "The Hub has no repository " + id.repo() + " at revision '" + id.revision() + "' (404)"
                        : "The Hub has no file " + what + " (404)";
            });
            default -> throw new HubException(HubException.Kind.PROTOCOL, "The Hub answered " + status + " for " + what);
        }
    }

    private interface Attempt<T> {
        T run() throws IOException;
    }

    private static final class RetryableStatus extends IOException {
        RetryableStatus(int status) {
            super("the Hub answered " + status);
        }
    }

    private <T> T withRetries(String what, Attempt<T> attempt) {
        Duration wait = settings.backoff();
        for (int i = 1; ; i++) {
            try {
                return attempt.run();
            } catch (IOException e) {
                if (i >= settings.attempts()) {
                    throw new HubException(HubException.Kind.UNREACHABLE, "Cannot reach the Hub at " + settings.endpoint() + " for the "
                            + what + " after " + i + " tries: " + describe(e), e);
                }
                LOG.infof("Hub: %s failed (%s); try %d of %d in %d ms", what, describe(e), i + 1, settings.attempts(), wait.toMillis());
                try {
                    Thread.sleep(wait.toMillis());
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new HubException(HubException.Kind.UNREACHABLE, "Interrupted while waiting to retry the " + what, ie);
                }
                wait = wait.multipliedBy(2);
            }
        }
    }

    private static String describe(IOException e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    private static String encode(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }
}
