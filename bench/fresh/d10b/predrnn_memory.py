# expect-cause: carried-state
import torch
import torch.nn as nn


class SpatioTemporalLSTMCell(nn.Module):
    def __init__(self, in_ch, num_hidden, k=3):
        super().__init__()
        self.num_hidden = num_hidden
        self.conv_x = nn.Conv2d(in_ch, num_hidden * 7, k, padding=k // 2)
        self.conv_h = nn.Conv2d(num_hidden, num_hidden * 4, k, padding=k // 2)
        self.conv_m = nn.Conv2d(num_hidden, num_hidden * 3, k, padding=k // 2)
        self.conv_o = nn.Conv2d(num_hidden * 2, num_hidden, k, padding=k // 2)
        self.conv_last = nn.Conv2d(num_hidden * 2, num_hidden, 1)

    def forward(self, x_t, h_t, c_t, m_t):
        i_x, f_x, g_x, i_xp, f_xp, g_xp, o_x = torch.split(self.conv_x(x_t), self.num_hidden, 1)
        i_h, f_h, g_h, o_h = torch.split(self.conv_h(h_t), self.num_hidden, 1)
        i_m, f_m, g_m = torch.split(self.conv_m(m_t), self.num_hidden, 1)
        c_new = torch.sigmoid(f_x + f_h + 1.0) * c_t + torch.sigmoid(i_x + i_h) * torch.tanh(g_x + g_h)
        m_new = torch.sigmoid(f_xp + f_m + 1.0) * m_t + torch.sigmoid(i_xp + i_m) * torch.tanh(g_xp + g_m)
        mem = torch.cat((c_new, m_new), 1)
        h_new = torch.sigmoid(o_x + o_h + self.conv_o(mem)) * torch.tanh(self.conv_last(mem))  # expect: forward
        return h_new, c_new, m_new


class PredRNN(nn.Module):
    def __init__(self, frame_ch=1, num_hidden=(8, 8)):
        super().__init__()
        self.num_layers = len(num_hidden)
        self.cell_list = nn.ModuleList(
            [SpatioTemporalLSTMCell(frame_ch if i == 0 else num_hidden[i - 1], num_hidden[i]) for i in range(self.num_layers)])
        self.conv_last = nn.Conv2d(num_hidden[-1], frame_ch, 1)
        self.num_hidden = num_hidden
        self.h_t, self.c_t, self.memory = None, None, None

    def init_states(self, frames):
        b, _, _, hgt, wid = frames.shape
        self.h_t = [torch.zeros(b, n, hgt, wid) for n in self.num_hidden]
        self.c_t = [torch.zeros(b, n, hgt, wid) for n in self.num_hidden]
        self.memory = torch.zeros(b, self.num_hidden[0], hgt, wid)

    def forward(self, frames):
        if self.memory is None:
            self.init_states(frames)
        next_frames = []
        for t in range(frames.shape[1] - 1):
            net = frames[:, t]
            for i, cell in enumerate(self.cell_list):
                self.h_t[i], self.c_t[i], self.memory = cell(net, self.h_t[i], self.c_t[i], self.memory)
                net = self.h_t[i]
            next_frames.append(self.conv_last(net))
        return torch.stack(next_frames, dim=1)


torch.manual_seed(0)
model = PredRNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
mse = nn.MSELoss()
for itr in range(3):
    clips = torch.rand(2, 4, 1, 8, 8)
    next_frames = model(clips)
    loss = mse(next_frames, clips[:, 1:])
    optimizer.zero_grad()
    loss.backward()  # expect: raises frees
    optimizer.step()
    print(f"itr {itr} loss {loss.item():.5f}")
