package dev.ortserve.deploy;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import io.fabric8.kubernetes.api.model.ConfigMap;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.PersistentVolumeClaim;
import io.fabric8.kubernetes.api.model.Probe;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.autoscaling.v2.HorizontalPodAutoscaler;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import io.fabric8.kubernetes.api.model.policy.v1.PodDisruptionBudget;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Renders k8s/overlays/{cpu,gpu} with {@code kubectl kustomize}, reads every object into the
 * Kubernetes API model classes (fabric8) with unknown fields rejected, and checks the manifests
 * against the application itself: the container port is the HTTP port, the probes are the
 * health endpoints, every environment variable is a documented configuration key, the grace
 * period outlasts the drain timeout, and Redis is reachable at the address ortserve is given.
 */
class KubernetesManifestsTest {

    static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory()).configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);
    static final Map<String, Class<? extends HasMetadata>> KINDS = Map.of(
            "ConfigMap", ConfigMap.class, "Deployment", Deployment.class, "Service", Service.class,
            "PodDisruptionBudget", PodDisruptionBudget.class, "HorizontalPodAutoscaler", HorizontalPodAutoscaler.class,
            "NetworkPolicy", NetworkPolicy.class, "PersistentVolumeClaim", PersistentVolumeClaim.class,
            "Ingress", io.fabric8.kubernetes.api.model.networking.v1.Ingress.class);
    static final Set<String> HEALTH = Set.of("/q/health/started", "/q/health/ready", "/q/health/live");

    static String render(String overlay) throws Exception {
        Process p = new ProcessBuilder("kubectl", "kustomize", "k8s/overlays/" + overlay).redirectErrorStream(false).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "kubectl kustomize k8s/overlays/" + overlay + " failed: " + err);
        return out;
    }

    static List<HasMetadata> objects(String yaml) throws IOException {
        List<HasMetadata> out = new ArrayList<>();
        YAMLParser parser = new YAMLFactory().createParser(yaml);
        for (JsonNode doc : YAML.readValues(parser, JsonNode.class).readAll()) {
            if (doc == null || doc.isEmpty()) continue;
            String kind = doc.path("kind").asText();
            Class<? extends HasMetadata> type = KINDS.get(kind);
            assertNotNull(type, "unexpected kind " + kind);
            HasMetadata object = YAML.treeToValue(doc, type);
            List<String> unknown = new ArrayList<>();
            unknownFields(object, kind + "/" + object.getMetadata().getName(), unknown, new IdentityHashMap<>());
            assertEquals(List.of(), unknown, "fields the Kubernetes API does not know");
            out.add(object);
        }
        return out;
    }

    /** fabric8 keeps unknown fields in additionalProperties instead of failing: find them all. */
    static void unknownFields(Object o, String path, List<String> out, IdentityHashMap<Object, Boolean> seen) {
        if (o == null || seen.containsKey(o)) return;
        if (o instanceof List<?> list) {
            for (int i = 0; i < list.size(); i++) unknownFields(list.get(i), path + "[" + i + "]", out, seen);
            return;
        }
        if (o instanceof Map<?, ?> map) {
            map.forEach((k, v) -> unknownFields(v, path + "." + k, out, seen));
            return;
        }
        if (!o.getClass().getName().startsWith("io.fabric8.kubernetes.api.model")) return;
        seen.put(o, true);
        for (Method m : o.getClass().getMethods()) {
            if (m.getParameterCount() != 0 || !m.getName().startsWith("get") || m.getDeclaringClass() == Object.class) continue;
            try {
                Object value = m.invoke(o);
                if (m.getName().equals("getAdditionalProperties")) {
                    if (value instanceof Map<?, ?> extra && !extra.isEmpty()) out.add(path + ": " + extra.keySet());
                } else {
                    unknownFields(value, path + "." + m.getName().substring(3), out, seen);
                }
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** The environment variable names docs/configuration.md documents. */
    static Set<String> documentedEnv() throws IOException {
        Set<String> out = new HashSet<>();
        Matcher m = Pattern.compile("`((?:ORTSERVE|QUARKUS|HF)_[A-Z0-9_]+)`").matcher(Files.readString(Path.of("docs/configuration.md")));
        while (m.find()) out.add(m.group(1));
        return out;
    }

    static Properties applicationProperties() throws IOException {
        Properties p = new Properties();
        try (var in = Files.newInputStream(Path.of("src/main/resources/application.properties"))) {
            p.load(in);
        }
        return p;
    }

    @ParameterizedTest
    @ValueSource(strings = {"cpu", "gpu", "affinity"})
    void overlaysRenderValidObjectsThatMatchTheApplication(String overlay) throws Exception {
        List<HasMetadata> objects = objects(render(overlay));
        Deployment deployment = find(objects, Deployment.class, "ortserve");
        ConfigMap config = find(objects, ConfigMap.class, "ortserve-config");
        Container c = deployment.getSpec().getTemplate().getSpec().getContainers().get(0);

        // the port the application listens on
        int httpPort = Integer.parseInt(applicationProperties().getProperty("quarkus.http.port"));
        assertEquals(httpPort, c.getPorts().get(0).getContainerPort());
        assertEquals("http", c.getPorts().get(0).getName());
        Service service = find(objects, Service.class, "ortserve");
        assertEquals("http", service.getSpec().getPorts().get(0).getTargetPort().getStrVal());
        assertEquals(deployment.getSpec().getTemplate().getMetadata().getLabels().get("app.kubernetes.io/name"),
                service.getSpec().getSelector().get("app.kubernetes.io/name"));

        // probes on the health endpoints (served by SmallRye Health under /q/health)
        for (Probe probe : List.of(c.getStartupProbe(), c.getReadinessProbe(), c.getLivenessProbe())) {
            assertNotNull(probe);
            assertTrue(HEALTH.contains(probe.getHttpGet().getPath()), probe.getHttpGet().getPath());
            assertEquals("http", probe.getHttpGet().getPort().getStrVal());
        }
        assertEquals("/q/health/ready", c.getReadinessProbe().getHttpGet().getPath());

        // every variable set is a documented configuration key
        Set<String> documented = documentedEnv();
        Set<String> used = new HashSet<>(config.getData().keySet());
        for (EnvVar e : c.getEnv()) used.add(e.getName());
        for (String name : used) assertTrue(documented.contains(name), name + " is not documented in docs/configuration.md");

        // a Hub model, cached on the models volume that every replica shares and may write; the token from a Secret
        String model = config.getData().get("ORTSERVE_MODEL_PATH");
        assertTrue(dev.ortserve.hub.HubRepoId.parse(model).isPresent(), model + " is a Hub id");
        String hfHome = config.getData().get("HF_HOME");
        var modelsMount = c.getVolumeMounts().stream().filter(v -> hfHome.startsWith(v.getMountPath() + "/")).findFirst()
                .orElseThrow(() -> new AssertionError("HF_HOME " + hfHome + " is on no volume"));
        assertFalse(Boolean.TRUE.equals(modelsMount.getReadOnly()), "the Hub cache is writable");
        var modelsVolume = deployment.getSpec().getTemplate().getSpec().getVolumes().stream()
                .filter(v -> v.getName().equals(modelsMount.getName())).findFirst().orElseThrow();
        PersistentVolumeClaim pvc = find(objects, PersistentVolumeClaim.class, modelsVolume.getPersistentVolumeClaim().getClaimName());
        assertEquals(List.of("ReadWriteMany"), pvc.getSpec().getAccessModes(), "replicas share one cache");
        EnvVar token = c.getEnv().stream().filter(e -> e.getName().equals("HF_TOKEN")).findFirst().orElseThrow();
        assertNotNull(token.getValueFrom().getSecretKeyRef(), "HF_TOKEN comes from a Secret");
        assertFalse(config.getData().containsKey("HF_TOKEN"), "no token in the ConfigMap");
        // compaction items must open on every replica: one key for all, from a Secret
        EnvVar compaction = c.getEnv().stream().filter(e -> e.getName().equals("ORTSERVE_COMPACTION_KEY")).findFirst()
                .orElseThrow(() -> new AssertionError("ORTSERVE_COMPACTION_KEY is not set: each replica would seal compaction items under its own key"));
        assertNotNull(compaction.getValueFrom().getSecretKeyRef(), "ORTSERVE_COMPACTION_KEY comes from a Secret");
        assertFalse(config.getData().containsKey("ORTSERVE_COMPACTION_KEY"), "no compaction key in the ConfigMap");
        assertTrue(c.getStartupProbe().getPeriodSeconds() * c.getStartupProbe().getFailureThreshold() >= 1800,
                "the startup probe allows a first download");

        // the grace period outlasts the drain
        Duration drain = Duration.parse("PT" + config.getData().getOrDefault("ORTSERVE_DRAIN_TIMEOUT", "30s").toUpperCase());
        assertTrue(deployment.getSpec().getTemplate().getSpec().getTerminationGracePeriodSeconds() > drain.toSeconds());

        // hardening
        var pod = deployment.getSpec().getTemplate().getSpec();
        assertTrue(pod.getSecurityContext().getRunAsNonRoot());
        assertTrue(c.getSecurityContext().getReadOnlyRootFilesystem());
        assertFalse(c.getSecurityContext().getAllowPrivilegeEscalation());
        assertTrue(c.getVolumeMounts().stream().anyMatch(v -> v.getMountPath().equals("/tmp")), "a writable /tmp");
        assertEquals(2, deployment.getSpec().getReplicas());
        assertNotNull(c.getResources().getRequests().get("cpu"));
        assertNotNull(c.getResources().getLimits().get("memory"));
        find(objects, PodDisruptionBudget.class, "ortserve");
        find(objects, HorizontalPodAutoscaler.class, "ortserve");

        // Redis: where ortserve is told to find it, with eviction fit for TTL keys, reachable only from ortserve
        assertEquals("redis", config.getData().get("ORTSERVE_STORE"));
        String hosts = config.getData().get("QUARKUS_REDIS_HOSTS");
        Service redis = find(objects, Service.class, "ortserve-redis");
        assertEquals("redis://" + redis.getMetadata().getName() + ":" + redis.getSpec().getPorts().get(0).getPort(), hosts);
        Deployment redisDeployment = find(objects, Deployment.class, "ortserve-redis");
        List<String> args = redisDeployment.getSpec().getTemplate().getSpec().getContainers().get(0).getArgs();
        assertTrue(args.contains("--maxmemory") && args.get(args.indexOf("--maxmemory-policy") + 1).startsWith("volatile-"), args.toString());
        NetworkPolicy policy = find(objects, NetworkPolicy.class, "ortserve-redis");
        assertEquals(redisDeployment.getSpec().getTemplate().getMetadata().getLabels().get("app.kubernetes.io/name"),
                policy.getSpec().getPodSelector().getMatchLabels().get("app.kubernetes.io/name"));
        assertEquals("ortserve", policy.getSpec().getIngress().get(0).getFrom().get(0).getPodSelector().getMatchLabels().get("app.kubernetes.io/name"));

        if (overlay.equals("gpu")) {
            assertEquals("cuda", config.getData().get("ORTSERVE_EXECUTION_PROVIDER"));
            assertEquals("1", c.getResources().getLimits().get("nvidia.com/gpu").getAmount());
            assertTrue(c.getImage().endsWith("-gpu"), c.getImage());
            assertFalse(pod.getTolerations().isEmpty());
        }
    }

    /**
     * The models overlay: the models file comes from a ConfigMap mounted where ORTSERVE_MODELS_FILE points, the one-model
     * settings are gone (both set stop the start), every variable is documented, and the file is one the server reads.
     */
    @Test
    void theModelsOverlayServesAModelsFileFromAConfigMap() throws Exception {
        List<HasMetadata> objects = objects(render("models"));
        Deployment deployment = find(objects, Deployment.class, "ortserve");
        ConfigMap config = find(objects, ConfigMap.class, "ortserve-config");
        Container c = deployment.getSpec().getTemplate().getSpec().getContainers().get(0);
        assertFalse(config.getData().containsKey("ORTSERVE_MODEL_PATH"), "the models file replaces ORTSERVE_MODEL_PATH");
        Set<String> documented = documentedEnv();
        for (String name : config.getData().keySet()) assertTrue(documented.contains(name), name + " is not documented in docs/configuration.md");
        Path file = Path.of(config.getData().get("ORTSERVE_MODELS_FILE"));
        var mount = c.getVolumeMounts().stream().filter(v -> file.getParent().toString().equals(v.getMountPath())).findFirst()
                .orElseThrow(() -> new AssertionError(file + " is on no volume"));
        var volume = deployment.getSpec().getTemplate().getSpec().getVolumes().stream().filter(v -> v.getName().equals(mount.getName()))
                .findFirst().orElseThrow();
        ConfigMap models = objects.stream().filter(ConfigMap.class::isInstance).map(ConfigMap.class::cast)
                .filter(m -> m.getMetadata().getName().equals(volume.getConfigMap().getName())).findFirst()
                .orElseThrow(() -> new AssertionError("no ConfigMap " + volume.getConfigMap().getName()));
        String text = models.getData().get(file.getFileName().toString());
        assertNotNull(text, "the ConfigMap holds " + file.getFileName());
        Path copy = Files.createTempFile("models", ".yaml");
        try {
            Files.writeString(copy, text);
            var entries = dev.ortserve.service.ModelsFile.read(copy);
            assertTrue(entries.stream().anyMatch(dev.ortserve.service.ModelEntry::pinned), "a pinned model: ready means it is loaded");
            for (var e : entries) assertTrue(dev.ortserve.hub.HubRepoId.parse(e.path()).isPresent(), e.path() + " is a Hub id");
        } finally {
            Files.delete(copy);
        }
        assertEquals("/q/health/ready", c.getReadinessProbe().getHttpGet().getPath());
    }

    static <T extends HasMetadata> T find(List<HasMetadata> objects, Class<T> type, String name) {
        return objects.stream().filter(type::isInstance).map(type::cast).filter(o -> o.getMetadata().getName().equals(name)).findFirst()
                .orElseThrow(() -> new AssertionError("no " + type.getSimpleName() + " " + name));
    }

    /** The affinity overlay routes by a client header with consistent hashing, to the Service's http port. */
    @Test
    void theAffinityOverlayHashesConversationsOntoReplicas() throws Exception {
        List<HasMetadata> objects = objects(render("affinity"));
        io.fabric8.kubernetes.api.model.networking.v1.Ingress ingress =
                find(objects, io.fabric8.kubernetes.api.model.networking.v1.Ingress.class, "ortserve");
        assertEquals("$http_x_session_affinity", ingress.getMetadata().getAnnotations().get("nginx.ingress.kubernetes.io/upstream-hash-by"));
        assertEquals("off", ingress.getMetadata().getAnnotations().get("nginx.ingress.kubernetes.io/proxy-buffering"), "streams are not buffered");
        var backend = ingress.getSpec().getRules().get(0).getHttp().getPaths().get(0).getBackend().getService();
        Service service = find(objects, Service.class, backend.getName());
        assertEquals(backend.getPort().getName(), service.getSpec().getPorts().get(0).getName());
    }
}
