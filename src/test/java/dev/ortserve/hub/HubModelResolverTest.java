package dev.ortserve.hub;

import dev.ortserve.TinyModelResource;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelFiles;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.engine.load.ModelLoader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Hub client against a stand-in Hub the test starts, serving a repository made of the generated tiny model. */
class HubModelResolverTest {

    static final String REPO = "acme/tiny-onnx";
    static final String COMMIT = "0123456789abcdef0123456789abcdef01234567";
    static final String MODEL = "onnx/model.onnx";

    @TempDir
    Path cache;

    HubStandIn hub;
    Map<String, byte[]> files;

    @BeforeEach
    void start() throws IOException {
        hub = new HubStandIn();
        files = repoFiles();
        hub.publish(REPO, COMMIT, files, null);
    }

    @AfterEach
    void stop() {
        hub.close();
    }

    /** The tiny model laid out as an onnx-community repository: onnx/ variants, a README that serving never reads. */
    static Map<String, byte[]> repoFiles() throws IOException {
        Map<String, byte[]> out = new HashMap<>();
        HubStandIn.filesOf(TinyModelResource.directory()).forEach((name, bytes) -> out.put(name.equals("model.onnx") ? MODEL : name, bytes));
        out.put("onnx/model_q4.onnx", new byte[20_000]);
        out.put("onnx/model_fp16.onnx", new byte[20_000]);
        out.put("README.md", "# tiny\n".getBytes(StandardCharsets.UTF_8));
        return out;
    }

    HubSettings settings() {
        return new HubSettings(hub.endpoint(), cache, Optional.empty(), false, Duration.ofSeconds(20), Duration.ofSeconds(5), 3, Duration.ofMillis(20));
    }

    HubModelResolver.Resolved resolve(HubSettings settings, String spec) {
        HubRepoId id = HubRepoId.parse(spec).orElseThrow();
        return new HubModelResolver(settings).resolve(id, names -> ModelFiles.servingFiles(names, Optional.empty(), "Hub model " + id));
    }

    @Test
    void downloadsOnlyTheServingFilesIntoTheHuggingFaceCacheLayout() throws Exception {
        HubModelResolver.Resolved r = resolve(settings(), REPO);

        Path repoDir = cache.resolve("models--acme--tiny-onnx");
        assertEquals(repoDir.resolve("snapshots").resolve(COMMIT), r.directory());
        assertEquals(COMMIT, Files.readString(repoDir.resolve("refs/main")));
        assertEquals(Set.of("config.json", "generation_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", MODEL),
                hub.downloadedFiles());
        // snapshot files are relative symlinks into blobs/, named by the ETag (sha256 for the LFS-sized model)
        Path pointer = r.directory().resolve(MODEL);
        assertTrue(Files.isSymbolicLink(pointer));
        assertEquals(Path.of("../../../blobs/" + HubStandIn.sha256(files.get(MODEL))), Files.readSymbolicLink(pointer));
        Path config = r.directory().resolve("config.json");
        assertEquals(Path.of("../../blobs/" + HubStandIn.gitBlobId(files.get("config.json"))), Files.readSymbolicLink(config));
        assertArrayEquals(files.get(MODEL), Files.readAllBytes(pointer));
        assertFalse(Files.exists(r.directory().resolve("onnx/model_q4.onnx")));
        try (var blobs = Files.list(repoDir.resolve("blobs"))) {
            assertTrue(blobs.noneMatch(p -> p.getFileName().toString().endsWith(".incomplete")));
        }
        // and the engine serves it
        try (LoadedModel model = ModelLoader.load(r.directory(), EngineOptions.defaults())) {
            assertEquals(r.directory().resolve(MODEL), model.modelFile());
        }
    }

    @Test
    void restartsFromTheCacheOfflineAndWhenTheHubIsUnreachable() throws Exception {
        HubModelResolver.Resolved first = resolve(settings(), REPO);
        int downloads = hub.totalDownloads();

        HubModelResolver.Resolved again = resolve(settings(), REPO);
        assertEquals(first.directory(), again.directory());
        assertEquals(downloads, hub.totalDownloads(), "a second start downloads nothing");
        assertTrue(again.downloaded().isEmpty());

        hub.close();
        HubModelResolver.Resolved offline = resolve(settings().withOffline(true), REPO);
        assertEquals(first.directory(), offline.directory());
        assertTrue(offline.fromCache());

        int closedPort;
        try (ServerSocket s = new ServerSocket(0)) {
            closedPort = s.getLocalPort();
        }
        // five tries with a 2 s backoff would take 30 s: with the snapshot cached, two tries are enough
        HubSettings unreachable = new HubSettings(URI.create("http://127.0.0.1:" + closedPort), cache, Optional.empty(), false,
                Duration.ofSeconds(2), Duration.ofSeconds(5), 5, Duration.ofSeconds(2));
        long start = System.nanoTime();
        HubModelResolver.Resolved down = resolve(unreachable, REPO);
        assertEquals(first.directory(), down.directory());
        assertTrue(down.fromCache());
        assertTrue(System.nanoTime() - start < Duration.ofSeconds(10).toNanos(), "fell back to the cache after one backoff");

        HubException miss = assertThrows(HubException.class, () -> resolve(settings().withOffline(true), "acme/never-downloaded"));
        assertEquals(HubException.Kind.OFFLINE_MISS, miss.kind());
        assertTrue(miss.getMessage().contains("has no snapshot of acme/never-downloaded"), miss.getMessage());
    }

    @Test
    void resumesACutDownloadWithARangeRequest() throws Exception {
        hub.cutAfter(MODEL, 100_000);
        HubModelResolver.Resolved r = resolve(settings(), REPO);
        assertArrayEquals(files.get(MODEL), Files.readAllBytes(r.directory().resolve(MODEL)));
        // the stand-in drops the connection after 100,000 bytes; what reaches the client before the reset is up to TCP
        // (a reset discards what the client had not read yet: 94,704 bytes in one CI run), so the resume starts at
        // whatever the client kept, never at 0 and never past the cut
        assertEquals(1, hub.ranges().size(), hub.ranges().toString());
        java.util.regex.Matcher range = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(MODEL) + " bytes=(\\d+)-").matcher(hub.ranges().get(0));
        assertTrue(range.matches(), hub.ranges().get(0));
        long from = Long.parseLong(range.group(1));
        assertTrue(from > 0 && from <= 100_000, "resumed from byte " + from);
        assertEquals(2, hub.downloads(MODEL));
    }

    @Test
    void retriesServerErrors() throws Exception {
        hub.fail5xx(2);
        HubModelResolver.Resolved r = resolve(settings(), REPO);
        assertTrue(Files.isRegularFile(r.directory().resolve(MODEL)));
    }

    @Test
    void rejectsACorruptedDownloadAndLeavesNothingBehind() throws Exception {
        hub.corrupt(MODEL);
        HubException e = assertThrows(HubException.class, () -> resolve(settings(), REPO));
        assertEquals(HubException.Kind.CORRUPT, e.kind());
        assertTrue(e.getMessage().contains("sha256"), e.getMessage());
        Path repoDir = cache.resolve("models--acme--tiny-onnx");
        assertFalse(Files.exists(repoDir.resolve("blobs").resolve(HubStandIn.sha256(files.get(MODEL)))));
        assertFalse(Files.exists(repoDir.resolve("snapshots").resolve(COMMIT).resolve(MODEL), java.nio.file.LinkOption.NOFOLLOW_LINKS));
        try (var blobs = Files.list(repoDir.resolve("blobs"))) {
            assertTrue(blobs.noneMatch(p -> p.getFileName().toString().endsWith(".incomplete")));
        }
    }

    @Test
    void aFileLargerThanTheFreeSpaceStopsBeforeDownloading() {
        hub.advertiseSize(MODEL, 1L << 60);
        HubException e = assertThrows(HubException.class, () -> resolve(settings(), REPO));
        assertEquals(HubException.Kind.DISK_FULL, e.kind());
        assertTrue(e.getMessage().startsWith("Not enough disk space in " + cache + " for " + MODEL + ": it needs 1073741824.00 GiB"), e.getMessage());
        assertEquals(0, hub.downloads(MODEL));
    }

    @Test
    void privateRepositoryNeedsTheRightToken() throws Exception {
        hub.publish("acme/private-onnx", COMMIT, files, "hf_right");
        HubException none = assertThrows(HubException.class, () -> resolve(settings(), "acme/private-onnx"));
        assertEquals(HubException.Kind.UNAUTHORIZED, none.kind());
        assertTrue(none.getMessage().contains("HF_TOKEN"), none.getMessage());

        HubException wrong = assertThrows(HubException.class, () -> resolve(settings().withToken(Optional.of("hf_other")), "acme/private-onnx"));
        assertEquals(HubException.Kind.FORBIDDEN, wrong.kind());
        assertTrue(wrong.getMessage().contains("gated"), wrong.getMessage());

        // the token file huggingface_hub's login writes (HF_HOME/token) is read
        Path hfHome = cache.resolve("home");
        Files.createDirectories(hfHome);
        Files.writeString(hfHome.resolve("token"), "hf_right\n");
        HubSettings fromEnv = HubSettings.from(name -> Optional.ofNullable(Map.of("HF_HOME", hfHome.toString(),
                "HF_ENDPOINT", hub.endpoint().toString()).get(name)));
        assertEquals(Optional.of("hf_right"), fromEnv.token());
        assertEquals(hfHome.resolve("hub"), fromEnv.cacheDir());
        HubModelResolver.Resolved r = resolve(fromEnv, "acme/private-onnx");
        assertTrue(Files.isRegularFile(r.directory().resolve(MODEL)));
    }

    @Test
    void followsARenamedRepositoryAndKeepsTheTokenFromTheStorageHost() throws Exception {
        hub.publish("acme/private-onnx", COMMIT, files, "hf_right").rename("acme/old-name", "acme/private-onnx").viaCdn();
        HubModelResolver.Resolved r = resolve(settings().withToken(Optional.of("hf_right")), "acme/old-name");
        assertArrayEquals(files.get(MODEL), Files.readAllBytes(r.directory().resolve(MODEL)));
        // cached under the name asked for, as huggingface_hub does
        assertEquals(cache.resolve("models--acme--old-name/snapshots/" + COMMIT), r.directory());
        assertFalse(hub.cdnAuthorizations().isEmpty(), "the LFS files came from the storage host");
        assertTrue(hub.cdnAuthorizations().stream().allMatch("null"::equals), "no token sent to another host: " + hub.cdnAuthorizations());
    }

    @Test
    void notFoundNamesTheRepositoryRevisionOrVariant() {
        HubException repo = assertThrows(HubException.class, () -> resolve(settings().withToken(Optional.of("hf_any")), "acme/missing"));
        assertEquals(HubException.Kind.NOT_FOUND, repo.kind());
        assertTrue(repo.getMessage().contains("no repository acme/missing"), repo.getMessage());

        HubException rev = assertThrows(HubException.class, () -> resolve(settings(), REPO + "@v9"));
        assertTrue(rev.getMessage().contains("no revision 'v9'"), rev.getMessage());

        HubRepoId id = HubRepoId.parse(REPO).orElseThrow();
        ModelLoadException variant = assertThrows(ModelLoadException.class, () -> new HubModelResolver(settings())
                .resolve(id, names -> ModelFiles.servingFiles(names, Optional.of("onnx/model_int8.onnx"), "Hub model " + id)));
        assertEquals("Hub model acme/tiny-onnx has no ONNX file onnx/model_int8.onnx (ORTSERVE_MODEL_FILE); its ONNX files: "
                + "onnx/model.onnx, onnx/model_fp16.onnx, onnx/model_q4.onnx", variant.getMessage());
        assertEquals(0, hub.totalDownloads());
    }

    @Test
    void aChosenVariantIsTheOnlyOnnxFileFetched() {
        HubRepoId id = HubRepoId.parse(REPO).orElseThrow();
        new HubModelResolver(settings()).resolve(id, names -> ModelFiles.servingFiles(names, Optional.of("model_q4.onnx"), "Hub model " + id));
        assertEquals(1, hub.downloads("onnx/model_q4.onnx"));
        assertEquals(0, hub.downloads(MODEL));
    }

    @Test
    void twoResolversSharingACacheDownloadEachFileOnce() throws Exception {
        // the first download of the model waits until both resolvers have asked for its metadata:
        // both are then past the cache check, and only the lock keeps the second from downloading it again
        hub.holdFirstDownloadUntilHeads(MODEL, 2);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<HubModelResolver.Resolved>> results = new ArrayList<>();
            for (int i = 0; i < 2; i++) results.add(pool.submit((Callable<HubModelResolver.Resolved>) () -> resolve(settings(), REPO)));
            for (Future<HubModelResolver.Resolved> f : results) assertTrue(Files.isRegularFile(f.get(60, TimeUnit.SECONDS).directory().resolve(MODEL)));
        } finally {
            pool.shutdownNow();
        }
        assertEquals(2, hub.heads(MODEL));
        assertEquals(1, hub.downloads(MODEL));
    }

    @Test
    void twoProcessesSharingACacheDownloadEachFileOnce() throws Exception {
        hub.holdFirstDownloadUntilHeads(MODEL, 2);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<Process> processes = new ArrayList<>();
        List<Path> logs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Path log = cache.resolve("process-" + i + ".log");
            logs.add(log);
            processes.add(new ProcessBuilder(java, "-Djava.util.logging.manager=org.jboss.logmanager.LogManager", "-cp",
                    System.getProperty("java.class.path"), ResolveInAnotherProcess.class.getName(),
                    hub.endpoint().toString(), cache.toString(), REPO).redirectErrorStream(true).redirectOutput(log.toFile()).start());
        }
        for (int i = 0; i < 2; i++) {
            assertTrue(processes.get(i).waitFor(90, TimeUnit.SECONDS), "process " + i + " finished");
            assertEquals(0, processes.get(i).exitValue(), Files.readString(logs.get(i)));
            assertTrue(Files.readString(logs.get(i)).contains("RESOLVED " + cache.resolve("models--acme--tiny-onnx/snapshots/" + COMMIT)));
        }
        assertEquals(2, hub.heads(MODEL));
        assertEquals(1, hub.downloads(MODEL));
    }
}
