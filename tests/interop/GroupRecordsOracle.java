// Kafka's own serialisation of __consumer_offsets records, for tests/interop/test_group_records_java.py.
//
// Run as a single-file source program against Kafka's jars:
//   java -cp 'build/kafka/3.9.2/lib/*' tests/interop/GroupRecordsOracle.java < cases.tsv
// Each input line is one case, tab-separated; strings are hex of their UTF-8 bytes ("-" is null).
// Each output line is the hex of the bytes Kafka 3.9's generated record classes write
// (MessageUtil.toVersionPrefixedBytes; versions 0-3 are the non-flexible layouts Kafka 2.4 wrote),
// or, for "hash", String.hashCode and Utils.abs(hashCode) % n.
//
//   ock  version group topic partition
//   gmk  group
//   ocv  version offset leaderEpoch metadata commitTimestamp expireTimestamp
//   gmv  version protocolType generation protocol leader currentStateTimestamp memberCount
//        then per member: memberId groupInstanceId clientId clientHost rebalanceTimeout
//        sessionTimeout subscriptionHex assignmentHex
//   hash text partitions

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.OffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;

public class GroupRecordsOracle {
    private static final HexFormat HEX = HexFormat.of();

    private static String str(String hex) {
        return hex.equals("-") ? null : new String(HEX.parseHex(hex), StandardCharsets.UTF_8);
    }

    private static String bytes(short version, Message message) {
        return HEX.formatHex(MessageUtil.toVersionPrefixedBytes(version, message));
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            switch (f[0]) {
                case "ock" -> out.append(bytes(Short.parseShort(f[1]), new OffsetCommitKey()
                    .setGroup(str(f[2])).setTopic(str(f[3])).setPartition(Integer.parseInt(f[4]))));
                case "gmk" -> out.append(bytes((short) 2, new GroupMetadataKey().setGroup(str(f[1]))));
                case "ocv" -> out.append(bytes(Short.parseShort(f[1]), new OffsetCommitValue()
                    .setOffset(Long.parseLong(f[2])).setLeaderEpoch(Integer.parseInt(f[3]))
                    .setMetadata(str(f[4])).setCommitTimestamp(Long.parseLong(f[5]))
                    .setExpireTimestamp(Long.parseLong(f[6]))));
                case "gmv" -> {
                    List<GroupMetadataValue.MemberMetadata> members = new ArrayList<>();
                    int count = Integer.parseInt(f[7]);
                    for (int i = 0; i < count; i++) {
                        int b = 8 + 8 * i;
                        members.add(new GroupMetadataValue.MemberMetadata()
                            .setMemberId(str(f[b])).setGroupInstanceId(str(f[b + 1]))
                            .setClientId(str(f[b + 2])).setClientHost(str(f[b + 3]))
                            .setRebalanceTimeout(Integer.parseInt(f[b + 4]))
                            .setSessionTimeout(Integer.parseInt(f[b + 5]))
                            .setSubscription(HEX.parseHex(f[b + 6])).setAssignment(HEX.parseHex(f[b + 7])));
                    }
                    out.append(bytes(Short.parseShort(f[1]), new GroupMetadataValue()
                        .setProtocolType(str(f[2])).setGeneration(Integer.parseInt(f[3]))
                        .setProtocol(str(f[4])).setLeader(str(f[5]))
                        .setCurrentStateTimestamp(Long.parseLong(f[6])).setMembers(members)));
                }
                case "hash" -> {
                    String text = str(f[1]);
                    out.append(text.hashCode()).append(' ')
                        .append(Utils.abs(text.hashCode()) % Integer.parseInt(f[2]));
                }
                default -> throw new IllegalArgumentException("unknown case " + f[0]);
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
