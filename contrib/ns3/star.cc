// star.cc: ns-3 peer benchmark for inaemu's default job topology.
//
// 8 hosts, each on its own 10 Gbit/s point-to-point link (1 us delay) to one
// central IPv4 router. Host i sends 64 MiB of UDP payload in 1024-byte
// datagrams to host (i+1) mod 8, paced by an OnOff application at 10 Gbit/s
// (slightly above what the link carries once UDP/IP/PPP headers are added, so
// the link, not the application, is the bottleneck). Device queues are large
// enough that nothing is dropped, and no traffic-control queue disc is
// installed (the default FqCoDel would drop the standing queue).
//
// It times Simulator::Run() with std::chrono and prints one line:
//   ns3 <version>: <N> packets (<F> link frames) in <virtual> s virtual,
//   <wall> s wall: <pps> packets/wall-s, <fps> link-frames/wall-s
// where N counts datagrams received by the sinks and F counts frames that
// finished transmission on any point-to-point device (PhyTxEnd), i.e. frames
// that crossed a link. Any drop is reported on stderr and makes it exit 1.
//
// Options: --hosts=8 --bytes=67108864 --size=1024 --rate=10Gbps
//          --appRate=10Gbps --delay=1us --queue=100000p

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdio>
#include <string>

using namespace ns3;

static uint64_t g_rxPackets = 0;
static uint64_t g_rxBytes = 0;
static uint64_t g_txFrames = 0;
static uint64_t g_drops = 0;
static Time g_lastRx;

static void
SinkRx(Ptr<const Packet> p, const Address&)
{
    g_rxPackets++;
    g_rxBytes += p->GetSize();
    g_lastRx = Simulator::Now();
}

static void
PhyTxEnd(Ptr<const Packet>)
{
    g_txFrames++;
}

static void
Drop(Ptr<const Packet>)
{
    g_drops++;
}

static void
Ipv4Drop(const Ipv4Header&, Ptr<const Packet>, Ipv4L3Protocol::DropReason, Ptr<Ipv4>, uint32_t)
{
    g_drops++;
}

int
main(int argc, char* argv[])
{
    uint32_t hosts = 8;
    uint64_t bytes = 67108864; // 64 MiB per host
    uint32_t size = 1024;      // UDP payload per datagram
    std::string rate = "10Gbps";
    std::string appRate = "10Gbps";
    std::string delay = "1us";
    std::string queue = "100000p";

    CommandLine cmd(__FILE__);
    cmd.AddValue("hosts", "number of hosts on the star", hosts);
    cmd.AddValue("bytes", "UDP payload bytes each host sends", bytes);
    cmd.AddValue("size", "UDP payload bytes per datagram", size);
    cmd.AddValue("rate", "link rate", rate);
    cmd.AddValue("appRate", "sending application's rate", appRate);
    cmd.AddValue("delay", "one-way link delay", delay);
    cmd.AddValue("queue", "device queue size per link direction", queue);
    cmd.Parse(argc, argv);
    if (hosts < 2)
    {
        std::fprintf(stderr, "star: --hosts must be at least 2\n");
        return 2;
    }

    NodeContainer center;
    center.Create(1);
    NodeContainer hostNodes;
    hostNodes.Create(hosts);

    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(rate));
    p2p.SetChannelAttribute("Delay", StringValue(delay));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize(queue)));

    InternetStackHelper stack;
    stack.Install(center);
    stack.Install(hostNodes);

    std::vector<Ipv4Address> hostAddr(hosts);
    NetDeviceContainer allDevices;
    Ipv4AddressHelper addr;
    for (uint32_t i = 0; i < hosts; i++)
    {
        NetDeviceContainer d = p2p.Install(hostNodes.Get(i), center.Get(0));
        allDevices.Add(d);
        std::string net = "10.1." + std::to_string(i + 1) + ".0";
        addr.SetBase(net.c_str(), "255.255.255.252");
        Ipv4InterfaceContainer ifs = addr.Assign(d);
        hostAddr[i] = ifs.GetAddress(0);
    }
    // Assign() installed the default root queue disc (FqCoDel) on every
    // device; remove it so packets queue only in the large DropTail device
    // queue, as in a plain output-queued switch.
    TrafficControlHelper tch;
    tch.Uninstall(allDevices);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const uint16_t port = 9000;
    ApplicationContainer sinks;
    ApplicationContainer sources;
    for (uint32_t i = 0; i < hosts; i++)
    {
        PacketSinkHelper sink("ns3::UdpSocketFactory",
                              InetSocketAddress(Ipv4Address::GetAny(), port));
        sinks.Add(sink.Install(hostNodes.Get(i)));

        uint32_t dst = (i + 1) % hosts;
        OnOffHelper onoff("ns3::UdpSocketFactory", InetSocketAddress(hostAddr[dst], port));
        onoff.SetConstantRate(DataRate(appRate), size);
        onoff.SetAttribute("MaxBytes", UintegerValue(bytes));
        sources.Add(onoff.Install(hostNodes.Get(i)));
    }
    sinks.Start(Seconds(0));
    sources.Start(Seconds(0));
    // Applications stop late; the run ends when the event list drains (the
    // OnOff sources stop scheduling once MaxBytes is sent). The virtual time
    // reported is the arrival of the last datagram.
    sinks.Stop(Seconds(100));
    sources.Stop(Seconds(100));

    for (uint32_t i = 0; i < sinks.GetN(); i++)
    {
        sinks.Get(i)->TraceConnectWithoutContext("Rx", MakeCallback(&SinkRx));
    }
    for (uint32_t i = 0; i < allDevices.GetN(); i++)
    {
        Ptr<NetDevice> d = allDevices.Get(i);
        d->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&PhyTxEnd));
        d->TraceConnectWithoutContext("MacTxDrop", MakeCallback(&Drop));
        d->TraceConnectWithoutContext("PhyTxDrop", MakeCallback(&Drop));
        d->TraceConnectWithoutContext("PhyRxDrop", MakeCallback(&Drop));
    }
    Config::ConnectWithoutContext("/NodeList/*/$ns3::Ipv4L3Protocol/Drop",
                                  MakeCallback(&Ipv4Drop));

    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto t1 = std::chrono::steady_clock::now();
    Simulator::Destroy();

    double wall = std::chrono::duration<double>(t1 - t0).count();
    double virt = g_lastRx.GetSeconds();
    uint64_t wantPackets = uint64_t(hosts) * ((bytes + size - 1) / size);
    std::printf("ns3 %u.%u: %llu packets (%llu link frames) in %.6f s virtual, %.3f s wall: "
                "%.0f packets/wall-s, %.0f link-frames/wall-s\n",
                Version::Major(),
                Version::Minor(),
                (unsigned long long)g_rxPackets,
                (unsigned long long)g_txFrames,
                virt,
                wall,
                g_rxPackets / wall,
                g_txFrames / wall);
    std::fprintf(stderr,
                 "star: ns-3 %s build; %u hosts, %llu payload bytes received, "
                 "goodput per host %.3f Gbit/s, %llu drops\n",
                 Version::BuildProfile().c_str(),
                 hosts,
                 (unsigned long long)g_rxBytes,
                 virt > 0 ? g_rxBytes * 8.0 / hosts / virt / 1e9 : 0.0,
                 (unsigned long long)g_drops);
    if (g_drops != 0 || g_rxPackets != wantPackets)
    {
        std::fprintf(stderr,
                     "star: expected %llu packets and no drops\n",
                     (unsigned long long)wantPackets);
        return 1;
    }
    return 0;
}
