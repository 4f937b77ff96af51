package dev.ortserve.service.responses;

import dev.ortserve.config.OrtserveConfig;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import org.jboss.logging.Logger;

import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;

/**
 * Seals compaction items and encrypted reasoning: AES-256-GCM with a key derived (SHA-256) from {@code ortserve.compaction-key},
 * the owner (API key digest) as associated data, so an item opens only on a replica that shares the
 * key and only for the API key that made it; any change to it fails authentication.
 */
@ApplicationScoped
public class CompactionSeal {

    private static final Logger LOG = Logger.getLogger(CompactionSeal.class);
    private static final String VERSION = "v1.";
    private static final SecureRandom RANDOM = new SecureRandom();

    @Inject
    OrtserveConfig config;

    private volatile SecretKeySpec key;

    /** The content could not be opened: tampered, truncated, another server's key or another API key's item. */
    public static final class Unreadable extends Exception {
        Unreadable(String message) {
            super(message, null, false, false);
        }
    }

    private SecretKeySpec key() {
        SecretKeySpec k = key;
        if (k != null) return k;
        synchronized (this) {
            if (key == null) {
                byte[] material;
                if (config.compactionKey().isPresent() && !config.compactionKey().get().isBlank()) {
                    material = sha256(config.compactionKey().get().getBytes(StandardCharsets.UTF_8));
                } else {
                    material = new byte[32];
                    RANDOM.nextBytes(material);
                    LOG.warn("No ortserve.compaction-key (ORTSERVE_COMPACTION_KEY): compaction items are sealed with a random key of this "
                            + "process and cannot be read by other replicas or after a restart");
                }
                key = new SecretKeySpec(material, "AES");
            }
            return key;
        }
    }

    public String seal(String plaintext, String owner) {
        try {
            byte[] nonce = new byte[12];
            RANDOM.nextBytes(nonce);
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.ENCRYPT_MODE, key(), new GCMParameterSpec(128, nonce));
            cipher.updateAAD(owner.getBytes(StandardCharsets.UTF_8));
            byte[] sealed = cipher.doFinal(plaintext.getBytes(StandardCharsets.UTF_8));
            byte[] out = new byte[nonce.length + sealed.length];
            System.arraycopy(nonce, 0, out, 0, nonce.length);
            System.arraycopy(sealed, 0, out, nonce.length, sealed.length);
            return VERSION + Base64.getUrlEncoder().withoutPadding().encodeToString(out);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("AES-GCM is not available", e);
        }
    }

    /** Reasoning text for {@code include: ["reasoning.encrypted_content"]}: sealed apart from compaction items (another associated data). */
    public String sealReasoning(String text, String owner) {
        return seal(text, REASONING + owner);
    }

    public String openReasoning(String encrypted, String owner) throws Unreadable {
        return open(encrypted, REASONING + owner);
    }

    private static final String REASONING = "reasoning\u0000";

    public String open(String encrypted, String owner) throws Unreadable {
        if (encrypted == null || !encrypted.startsWith(VERSION)) throw new Unreadable("not a compaction item of this server");
        byte[] raw;
        try {
            raw = Base64.getUrlDecoder().decode(encrypted.substring(VERSION.length()));
        } catch (IllegalArgumentException e) {
            throw new Unreadable("not valid base64url");
        }
        if (raw.length < 12 + 16) throw new Unreadable("too short");
        try {
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.DECRYPT_MODE, key(), new GCMParameterSpec(128, raw, 0, 12));
            cipher.updateAAD(owner.getBytes(StandardCharsets.UTF_8));
            return new String(cipher.doFinal(raw, 12, raw.length - 12), StandardCharsets.UTF_8);
        } catch (AEADBadTagException e) {
            throw new Unreadable("it failed authentication");
        } catch (GeneralSecurityException e) {
            throw new Unreadable("it could not be decrypted");
        }
    }

    private static byte[] sha256(byte[] in) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(in);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }
}
