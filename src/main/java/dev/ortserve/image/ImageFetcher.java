package dev.ortserve.image;

import java.io.IOException;
import java.io.InputStream;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * Fetches images from http(s) URLs under the operator's policy: off unless enabled; only the
 * allowed hosts when a list is given; never an address inside the server's network (loopback,
 * private, link-local, unique-local, carrier-grade NAT) unless the operator names that host;
 * redirects followed by hand, each target checked the same way; a byte cap and a time cap. Blocking:
 * call it off the event loop.
 */
public final class ImageFetcher {

    private static final int MAX_REDIRECTS = 3;

    /**
     * @param enabled      whether URLs are fetched at all
     * @param allowedHosts host names allowed ({@code example.com}, or {@code *.example.com} for its subdomains); empty: any public host
     * @param maxBytes     the most bytes one image may have
     * @param timeout      the most time one fetch may take, redirects included
     */
    public record Policy(boolean enabled, List<String> allowedHosts, long maxBytes, Duration timeout) {

        public Policy {
            allowedHosts = allowedHosts.stream().map(h -> h.strip().toLowerCase(Locale.ROOT)).filter(h -> !h.isEmpty()).toList();
        }

        boolean listed(String host) {
            return allowedHosts.stream().anyMatch(a -> a.equals(host) || a.startsWith("*.") && host.endsWith(a.substring(1)));
        }

        /** Named exactly by the operator: its addresses may be inside the network. */
        boolean named(String host) {
            return allowedHosts.contains(host);
        }
    }

    private final Policy policy;
    private final HttpClient client;

    public ImageFetcher(Policy policy) {
        this.policy = policy;
        this.client = HttpClient.newBuilder().followRedirects(HttpClient.Redirect.NEVER).connectTimeout(policy.timeout()).build();
    }

    public Policy policy() {
        return policy;
    }

    /** The bytes at {@code uri}; an {@link ImageException} that says why when the policy refuses it or the fetch fails. */
    public byte[] fetch(URI uri) {
        if (!policy.enabled()) {
            throw new ImageException("This server does not fetch image URLs: send the image inline as a base64 data: URL "
                    + "(data:image/png;base64,...).");
        }
        long deadline = System.nanoTime() + policy.timeout().toNanos();
        URI at = uri;
        for (int hop = 0; ; hop++) {
            check(at);
            Duration left = Duration.ofNanos(deadline - System.nanoTime());
            if (left.isNegative() || left.isZero()) throw timedOut();
            HttpResponse<InputStream> response;
            try {
                response = client.send(HttpRequest.newBuilder(at).timeout(left).header("Accept", "image/*").GET().build(),
                        HttpResponse.BodyHandlers.ofInputStream());
            } catch (java.net.http.HttpTimeoutException e) {
                throw timedOut();
            } catch (IOException e) {
                throw new ImageException("The image URL could not be fetched (the connection failed).");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new ImageException("The image URL could not be fetched (the server is stopping).");
            }
            int status = response.statusCode();
            if (status >= 300 && status < 400) {
                close(response);
                Optional<String> location = response.headers().firstValue("location");
                if (location.isEmpty() || hop >= MAX_REDIRECTS) {
                    throw new ImageException("The image URL redirects " + (location.isEmpty() ? "without a location" : "too many times")
                            + ": give the image's final URL.");
                }
                at = at.resolve(location.get());
                String scheme = at.getScheme() == null ? "" : at.getScheme().toLowerCase(Locale.ROOT);
                if (!scheme.equals("http") && !scheme.equals("https")) {
                    throw new ImageException("The image URL redirects to a URL that is not http(s).");
                }
                continue;
            }
            if (status != 200) {
                close(response);
                throw new ImageException("The image URL answered HTTP " + status + ", not the image.");
            }
            long declared = response.headers().firstValueAsLong("content-length").orElse(-1);
            if (declared > policy.maxBytes()) {
                close(response);
                throw tooLarge();
            }
            try (InputStream body = response.body()) {
                byte[] bytes = body.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, policy.maxBytes() + 1));
                if (bytes.length > policy.maxBytes()) throw tooLarge();
                if (System.nanoTime() > deadline) throw timedOut();
                return bytes;
            } catch (IOException e) {
                throw new ImageException("The image URL could not be read to its end.");
            }
        }
    }

    /** Refuses a host the policy does not allow, or one inside the network the operator did not name. */
    private void check(URI uri) {
        String host = uri.getHost();
        if (host == null) throw new ImageException("The image URL has no host.");
        host = host.toLowerCase(Locale.ROOT);
        if (host.startsWith("[") && host.endsWith("]")) host = host.substring(1, host.length() - 1);
        if (!policy.allowedHosts().isEmpty() && !policy.listed(host)) {
            throw new ImageException("This server fetches images only from the hosts it allows, and '" + host + "' is not one of them.");
        }
        if (policy.named(host)) return;
        InetAddress[] addresses;
        try {
            addresses = InetAddress.getAllByName(host);
        } catch (UnknownHostException e) {
            throw new ImageException("The image URL's host '" + host + "' could not be resolved.");
        }
        for (InetAddress address : addresses) {
            if (internal(address)) {
                throw new ImageException("The image URL's host '" + host + "' is a private or local address, which this server does not fetch.");
            }
        }
    }

    /** Loopback, private, link-local, unique-local, carrier-grade NAT, unspecified or multicast. */
    static boolean internal(InetAddress address) {
        if (address.isLoopbackAddress() || address.isSiteLocalAddress() || address.isLinkLocalAddress() || address.isAnyLocalAddress()
                || address.isMulticastAddress()) {
            return true;
        }
        byte[] b = address.getAddress();
        if (address instanceof Inet4Address) {
            int first = b[0] & 0xff;
            int second = b[1] & 0xff;
            return first == 0 || first == 100 && second >= 64 && second < 128 || first == 169 && second == 254 || first >= 240;
        }
        if (address instanceof Inet6Address) {
            if ((b[0] & 0xfe) == 0xfc) return true; // fc00::/7
            // IPv4-mapped ::ffff:a.b.c.d
            boolean mapped = true;
            for (int i = 0; i < 10; i++) mapped &= b[i] == 0;
            if (mapped && (b[10] & 0xff) == 0xff && (b[11] & 0xff) == 0xff) {
                try {
                    return internal(InetAddress.getByAddress(new byte[] {b[12], b[13], b[14], b[15]}));
                } catch (UnknownHostException e) {
                    return true;
                }
            }
        }
        return false;
    }

    private static void close(HttpResponse<InputStream> response) {
        try {
            response.body().close();
        } catch (IOException ignored) {
            // the connection is dropped either way
        }
    }

    private ImageException tooLarge() {
        return new ImageException("The image at the URL is larger than this server takes (at most " + policy.maxBytes() + " bytes per image).");
    }

    private ImageException timedOut() {
        return new ImageException("The image URL took longer than " + policy.timeout().toSeconds() + " s to fetch.");
    }
}
