package dev.ortserve.hub;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

/**
 * A stand-in for the Hugging Face Hub that the tests start: a real HTTP server speaking the part of
 * the Hub's API that ortserve and huggingface_hub use (revision info, tree listing, HEAD/GET on
 * resolve URLs with X-Repo-Commit, ETag / X-Linked-Etag / X-Linked-Size and Range), for
 * repositories built from directories. Switches break it the ways the real one breaks: a
 * connection cut mid-file, corrupted bytes, a token required (401/403), 5xx answers; counters say
 * what was downloaded.
 */
public final class HubStandIn implements AutoCloseable {

    /** Files at or above this size are served as LFS files (sha256 ETag), like the Hub's LFS/Xet files. */
    static final int LFS_THRESHOLD = 10_000;

    /**
     * A published repository; its files' git blob ids and (for LFS-sized files) sha256 digests are
     * computed once when it is published, as the Hub stores them, so that no request handler hashes
     * 90 MB while the client's request timeout runs (a cold, interpreted SHA-256 on a loaded 2-core
     * CI machine took longer than the 20 s timeout).
     */
    private record Repo(String commit, Map<String, byte[]> files, String token, Map<String, String> blobIds, Map<String, String> sha256s) {
        static Repo of(String commit, Map<String, byte[]> files, String token) {
            Map<String, String> blobIds = new TreeMap<>();
            Map<String, String> sha256s = new TreeMap<>();
            files.forEach((name, bytes) -> {
                blobIds.put(name, gitBlobId(bytes));
                if (bytes.length >= LFS_THRESHOLD) sha256s.put(name, sha256(bytes));
            });
            return new Repo(commit, new TreeMap<>(files), token, blobIds, sha256s);
        }

        /** The ETag the Hub sends for a file: the sha256 of an LFS file, else the git blob id. */
        String etag(String name) {
            return sha256s.getOrDefault(name, blobIds.get(name));
        }
    }

    private final HttpServer server;
    private final ObjectMapper json = new ObjectMapper();
    private final Map<String, Repo> repos = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> gets = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> heads = new ConcurrentHashMap<>();
    private final List<String> ranges = new CopyOnWriteArrayList<>();
    private final Map<String, Long> cutAfter = new ConcurrentHashMap<>();
    private final Set<String> corrupt = ConcurrentHashMap.newKeySet();
    private final AtomicInteger failures5xx = new AtomicInteger();
    private final Map<String, Long> advertisedSize = new ConcurrentHashMap<>();
    private final Map<String, String> renamed = new ConcurrentHashMap<>();
    private final List<String> cdnAuthorizations = new CopyOnWriteArrayList<>();
    private volatile boolean cdn;
    private volatile String holdFile;
    private volatile int holdUntilHeads;

    public HubStandIn() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.createContext("/", this::handle);
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
    }

    public URI endpoint() {
        return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
    }

    /** Publishes {@code files} (path in the repo to contents) as {@code repo} at {@code commit} (main points to it); a non-null {@code token} makes it private. */
    public HubStandIn publish(String repo, String commit, Map<String, byte[]> files, String token) {
        repos.put(repo, Repo.of(commit, files, token));
        return this;
    }

    /** The files of a directory, by their relative paths. */
    public static Map<String, byte[]> filesOf(Path dir) throws IOException {
        Map<String, byte[]> files = new TreeMap<>();
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) walk.filter(Files::isRegularFile)::iterator) {
                files.put(dir.relativize(p).toString().replace('\\', '/'), Files.readAllBytes(p));
            }
        }
        return files;
    }

    public HubStandIn cutAfter(String file, long bytes) {
        cutAfter.put(file, bytes);
        return this;
    }

    public HubStandIn corrupt(String file) {
        corrupt.add(file);
        return this;
    }

    /** Requests for {@code oldName} get relative redirects to {@code newName}, as the Hub answers for a renamed repository. */
    public HubStandIn rename(String oldName, String newName) {
        renamed.put(oldName, newName);
        return this;
    }

    /**
     * LFS-sized files are served as the Hub serves them: the resolve URL answers 302 to a storage host
     * (here "localhost" instead of "127.0.0.1", another host to the client), which needs no token.
     */
    public HubStandIn viaCdn() {
        cdn = true;
        return this;
    }

    /** The Authorization headers the storage host received (a client must not send its Hub token there). */
    public List<String> cdnAuthorizations() {
        return List.copyOf(cdnAuthorizations);
    }

    /** HEAD announces this size (X-Linked-Size) for {@code file}: a file larger than the disk. */
    public HubStandIn advertiseSize(String file, long size) {
        advertisedSize.put(file, size);
        return this;
    }

    public HubStandIn fail5xx(int times) {
        failures5xx.set(times);
        return this;
    }

    /** The first GET of {@code file} waits until {@code count} HEADs of it came (from competing downloaders) before it sends the body. */
    public HubStandIn holdFirstDownloadUntilHeads(String file, int count) {
        holdFile = file;
        holdUntilHeads = count;
        return this;
    }

    public int downloads(String file) {
        return gets.getOrDefault(file, new AtomicInteger()).get();
    }

    public int totalDownloads() {
        return gets.values().stream().mapToInt(AtomicInteger::get).sum();
    }

    public Set<String> downloadedFiles() {
        return Set.copyOf(gets.keySet());
    }

    public List<String> ranges() {
        return List.copyOf(ranges);
    }

    public byte[] file(String repo, String path) {
        return repos.get(repo).files().get(path);
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            String path = URLDecoder.decode(ex.getRequestURI().getRawPath(), StandardCharsets.UTF_8);
            if (failures5xx.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                send(ex, 503, "{\"error\":\"overloaded\"}", Map.of());
                return;
            }
            for (Map.Entry<String, String> r : renamed.entrySet()) {
                String from = "/" + r.getKey() + "/";
                int at = path.indexOf(from);
                if (at == 0 || (at > 0 && path.startsWith("/api/models/"))) {
                    String target = path.substring(0, at) + "/" + r.getValue() + "/" + path.substring(at + from.length());
                    String query = ex.getRequestURI().getRawQuery();
                    ex.getResponseHeaders().set("Location", target + (query == null ? "" : "?" + query));
                    send(ex, 307, "{}", Map.of());
                    return;
                }
            }
            if (path.startsWith("/cdn/")) {
                cdnAuthorizations.add(String.valueOf(ex.getRequestHeaders().getFirst("Authorization")));
                resolve(ex, path.substring("/cdn/".length()), true);
                return;
            }
            if (path.startsWith("/api/models/")) {
                api(ex, path.substring("/api/models/".length()));
            } else if (path.contains("/resolve/")) {
                resolve(ex, path.substring(1), false);
            } else {
                send(ex, 404, "{\"error\":\"Not Found\"}", Map.of());
            }
        } catch (RuntimeException | InterruptedException e) {
            send(ex, 500, "{\"error\":\"" + e + "\"}", Map.of());
        } finally {
            ex.close();
        }
    }

    private Repo authorised(HttpExchange ex, String name) throws IOException {
        Repo repo = repos.get(name);
        String auth = ex.getRequestHeaders().getFirst("Authorization");
        if (repo == null) {
            // like the Hub: an unknown repo and a private one without a token look the same (401) unless authenticated
            if (auth == null) send(ex, 401, "{\"error\":\"Repository not found\"}", Map.of("X-Error-Code", "RepoNotFound"));
            else send(ex, 404, "{\"error\":\"Repository not found\"}", Map.of("X-Error-Code", "RepoNotFound"));
            return null;
        }
        if (repo.token() != null) {
            if (auth == null || !auth.startsWith("Bearer ")) {
                send(ex, 401, "{\"error\":\"Invalid credentials\"}", Map.of("X-Error-Code", "RepoNotFound"));
                return null;
            }
            if (!auth.substring(7).equals(repo.token())) {
                send(ex, 403, "{\"error\":\"Access denied\"}", Map.of("X-Error-Code", "GatedRepo"));
                return null;
            }
        }
        return repo;
    }

    private void api(HttpExchange ex, String rest) throws IOException {
        // {owner}/{name}/revision/{rev} or {owner}/{name}/tree/{rev}[/path]
        String[] parts = rest.split("/", 5);
        if (parts.length < 4) {
            send(ex, 404, "{}", Map.of());
            return;
        }
        Repo repo = authorised(ex, parts[0] + "/" + parts[1]);
        if (repo == null) return;
        String rev = parts[3];
        if (!rev.equals("main") && !rev.equals(repo.commit())) {
            send(ex, 404, "{\"error\":\"Invalid rev id\"}", Map.of("X-Error-Code", "RevisionNotFound"));
            return;
        }
        if (parts[2].equals("revision")) {
            ObjectNode body = json.createObjectNode();
            body.put("id", parts[0] + "/" + parts[1]);
            body.put("sha", repo.commit());
            ArrayNode siblings = body.putArray("siblings");
            repo.files().forEach((name, bytes) -> {
                ObjectNode s = siblings.addObject();
                s.put("rfilename", name);
                s.put("size", bytes.length);
                s.put("blobId", repo.blobIds().get(name));
                if (bytes.length >= LFS_THRESHOLD) s.putObject("lfs").put("sha256", repo.sha256s().get(name)).put("size", bytes.length).put("pointerSize", 134);
            });
            send(ex, 200, json.writeValueAsString(body), Map.of());
        } else if (parts[2].equals("tree")) {
            ArrayNode items = json.createArrayNode();
            repo.files().forEach((name, bytes) -> {
                ObjectNode s = items.addObject();
                s.put("type", "file");
                s.put("path", name);
                s.put("size", bytes.length);
                s.put("oid", repo.blobIds().get(name));
                if (bytes.length >= LFS_THRESHOLD) s.putObject("lfs").put("oid", repo.sha256s().get(name)).put("size", bytes.length).put("pointerSize", 134);
            });
            send(ex, 200, json.writeValueAsString(items), Map.of());
        } else {
            send(ex, 404, "{}", Map.of());
        }
    }

    private void resolve(HttpExchange ex, String rest, boolean fromCdn) throws IOException, InterruptedException {
        // {owner}/{name}/resolve/{rev}/{file...}
        String[] parts = rest.split("/", 5);
        if (parts.length < 5) {
            send(ex, 404, "{}", Map.of());
            return;
        }
        Repo repo = fromCdn ? repos.get(parts[0] + "/" + parts[1]) : authorised(ex, parts[0] + "/" + parts[1]);
        if (repo == null) return;
        String rev = parts[3];
        String file = parts[4];
        if (!rev.equals("main") && !rev.equals(repo.commit())) {
            send(ex, 404, "{}", Map.of("X-Error-Code", "RevisionNotFound"));
            return;
        }
        byte[] bytes = repo.files().get(file);
        if (bytes == null) {
            send(ex, 404, "{\"error\":\"Entry not found\"}", Map.of("X-Error-Code", "EntryNotFound"));
            return;
        }
        boolean lfs = bytes.length >= LFS_THRESHOLD;
        var h = ex.getResponseHeaders();
        h.set("X-Repo-Commit", repo.commit());
        h.set("ETag", "\"" + repo.etag(file) + "\"");
        if (lfs) {
            h.set("X-Linked-Etag", "\"" + repo.etag(file) + "\"");
            h.set("X-Linked-Size", Long.toString(advertisedSize.getOrDefault(file, (long) bytes.length)));
        }
        h.set("Accept-Ranges", "bytes");
        if (ex.getRequestMethod().equals("HEAD")) {
            heads.computeIfAbsent(file, k -> new AtomicInteger()).incrementAndGet();
            h.set("Content-Length", Integer.toString(bytes.length));
            ex.sendResponseHeaders(200, -1);
            return;
        }
        if (cdn && lfs && !fromCdn) {
            h.set("Location", "http://localhost:" + server.getAddress().getPort() + "/cdn/" + rest);
            ex.sendResponseHeaders(302, -1);
            return;
        }
        int count = gets.computeIfAbsent(file, k -> new AtomicInteger()).incrementAndGet();
        if (count == 1 && file.equals(holdFile)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (heads.getOrDefault(file, new AtomicInteger()).get() < holdUntilHeads && System.nanoTime() < deadline) Thread.sleep(10);
        }
        byte[] body = bytes;
        if (corrupt.contains(file)) {
            body = bytes.clone();
            body[body.length / 2] ^= 0x5a;
        }
        int from = 0;
        String range = ex.getRequestHeaders().getFirst("Range");
        if (range != null && range.startsWith("bytes=") && range.endsWith("-")) {
            ranges.add(file + " " + range);
            from = Integer.parseInt(range.substring(6, range.length() - 1));
            if (from >= body.length) {
                h.set("Content-Range", "bytes */" + body.length);
                ex.sendResponseHeaders(416, -1);
                return;
            }
            h.set("Content-Range", "bytes " + from + "-" + (body.length - 1) + "/" + body.length);
        }
        int length = body.length - from;
        ex.sendResponseHeaders(from > 0 ? 206 : 200, length);
        Long cut = cutAfter.remove(file);
        OutputStream out = ex.getResponseBody();
        if (cut != null) {
            out.write(body, from, (int) Math.min(cut, length));
            out.flush();
            // close the socket under the half-sent body: the client sees the connection drop
            throw new IOException("cut on purpose");
        }
        out.write(body, from, length);
    }

    private static void send(HttpExchange ex, int status, String body, Map<String, String> headers) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        headers.forEach((k, v) -> ex.getResponseHeaders().set(k, v));
        ex.getResponseHeaders().set("Content-Type", "application/json");
        if (ex.getRequestMethod().equals("HEAD")) {
            ex.sendResponseHeaders(status, -1);
            return;
        }
        ex.sendResponseHeaders(status, bytes.length);
        ex.getResponseBody().write(bytes);
    }

    static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static String gitBlobId(byte[] bytes) {
        try {
            MessageDigest sha1 = MessageDigest.getInstance("SHA-1");
            sha1.update(("blob " + bytes.length + "\0").getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(sha1.digest(bytes));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    public int heads(String file) {
        return heads.getOrDefault(file, new AtomicInteger()).get();
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
